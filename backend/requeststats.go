package backend

// RequestStats are a backend's counts of the requests it made for reads,
// for backends that keep them (see StatsReporter).
type RequestStats struct {
	// Gets counts the GETs sent for reads, hedges and retries included.
	Gets int64
	// Hedges counts second GETs sent for a read whose first was slow to
	// answer; HedgesWon those that answered first.
	Hedges    int64
	HedgesWon int64
	// FirstByteTimeouts counts GETs abandoned for giving no answer in
	// time, and BodyTimeouts those whose body stopped coming.
	FirstByteTimeouts int64
	BodyTimeouts      int64
	// Retries counts GETs made again after a failure or a timeout.
	Retries int64
	// Throttled counts answers asking to slow down (503 SlowDown, 429).
	Throttled int64
	// FirstByteP99Millis is the recent 99th percentile of the time to a
	// GET's answer, which the timeouts follow; TimeoutMillis the first
	// attempt's timeout it gives, and HedgeMillis how long an urgent read
	// waits before a second GET.
	FirstByteP99Millis float64
	TimeoutMillis      float64
	HedgeMillis        float64
}

// StatsReporter is a Backend that counts its requests.
type StatsReporter interface {
	RequestStats() RequestStats
}
