package payment

// AgeCount is how many payments in one status have been in it for one age
// bucket: under_5m, 5m_to_1h, 1h_to_24h or over_24h.
type AgeCount struct {
	Status Status
	Age    string
	N      int64
}
