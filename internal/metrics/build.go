package metrics

import (
	"github.com/acmepay/payments/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
)

// newBuildInfo is payments_build_info: always 1, its labels name the
// running build, so a dashboard shows a rolling deploy and an alert can
// join on the version.
func newBuildInfo(bi buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "payments_build_info",
		Help: "Always 1; the labels name the running build (version stamped at build time, VCS revision, Go version).",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	return g
}
