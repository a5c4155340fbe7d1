package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// healthcheck exits 0 when the service's /readyz answers 200. It reads
// only HTTP_ADDR, so a container's HEALTHCHECK needs nothing else.
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	target := fs.String("url", "", "the URL to GET (default: /readyz on HTTP_ADDR)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usageErrorf("healthcheck: --timeout must be positive, not %s", *timeout)
	}
	u, err := healthcheckURL(*target, getenv("HTTP_ADDR"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// Straight to the service: a proxy from the environment would answer
	// for it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: not ready: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: not ready: GET %s answered %s", u, resp.Status)
	}
	_, err = fmt.Fprintf(stdout, "ready: GET %s answered %s\n", u, resp.Status)
	return err
}

// healthcheckURL is --url (with /readyz when it has no path), or /readyz
// on HTTP_ADDR, asked on loopback when the address listens on every
// interface.
func healthcheckURL(flagURL, httpAddr string) (string, error) {
	if flagURL != "" {
		u, err := url.Parse(flagURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", usageErrorf("healthcheck: --url must be an http(s) URL such as http://127.0.0.1:8080/readyz, not %q", flagURL)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/readyz"
		}
		return u.String(), nil
	}
	if httpAddr == "" {
		httpAddr = ":8080"
	}
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil || port == "" {
		return "", fmt.Errorf("healthcheck: HTTP_ADDR must be host:port such as :8080, not %q", httpAddr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
