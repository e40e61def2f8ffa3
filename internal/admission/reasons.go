package admission

// Reasons returns every reason Acquire can refuse with. The request path
// answers each with a refusal of the same name; a proxy test holds it to
// that, so a new reason here cannot reach a client as a 500.
func Reasons() []Reason { return append([]Reason(nil), reasons[:]...) }
