package config

import (
	"slices"

	"gopkg.in/yaml.v3"
)

// This file reads an upstream's health blocks: `health_check`,
// `outlier_detection` and `zones`, and an endpoint's `zone`.

// Bounds of the health fields.
const (
	maxCheckRun         = 100
	maxExpectStatuses   = 16
	maxHealthPathLen    = 1024
	maxFailureRun       = 1000
	maxFailoverZones    = 16
	maxOverprovisioning = 10
)

// healthCheck reads `health_check`: exactly one of http and tcp: true,
// and a timeout no longer than the interval.
func (p *parser) healthCheck(path string, n *yaml.Node) *HealthCheck {
	hc := defaultHealthCheck()
	f, ok := p.block(path, n, healthCheckBlock)
	if !ok {
		return hc
	}
	if v := f["http"]; v != nil {
		hc.HTTP = p.httpCheck(key(path, "http"), v)
	}
	// tcp, interval, timeout, healthy_after and unhealthy_after.
	bad := p.bind(f, n, path, healthCheckBlock, hc)
	switch {
	case bad["tcp"]:
	case hc.HTTP != nil && hc.TCP:
		p.add(firstKey(n, "tcp"), key(path, "tcp"), "http and tcp: true exclude each other; set one")
	case hc.HTTP == nil && !hc.TCP:
		p.add(n, path, "needs exactly one of http (such as {path: /healthz}) or tcp: true")
	}
	if !bad["interval"] && !bad["timeout"] && hc.Timeout > hc.Interval {
		at, where := f["timeout"], key(path, "timeout")
		if at == nil {
			p.add(f["interval"], key(path, "interval"), "must be at least timeout (%s, the default), got %s", hc.Timeout, describe(f["interval"]))
		} else {
			was := hc.Interval.String()
			if f["interval"] == nil {
				was += ", the default"
			}
			p.add(at, where, "must be at most interval (%s), got %s", was, describe(at))
		}
	}
	return hc
}

// httpCheck reads `health_check.http`; null reads as every default.
func (p *parser) httpCheck(path string, n *yaml.Node) *HTTPCheck {
	hc := defaultHTTPCheck()
	f, ok := p.block(path, n, httpCheckBlock)
	if !ok {
		return hc
	}
	p.bind(f, n, path, httpCheckBlock, hc) // path
	if v := f["expect"]; v != nil {
		hc.Expect = p.expect(key(path, "expect"), v)
	}
	return hc
}

// checkHealthPath returns the problem with a health check's path, or "".
func checkHealthPath(s string) string {
	problem := checkPathPrefix(s)
	if problem == "" && len(s) > maxHealthPathLen {
		problem = "must be at most 1024 bytes"
	}
	return problem
}

// expect reads a list of 1 to 16 distinct statuses, 100 to 599, sorted.
func (p *parser) expect(path string, n *yaml.Node) []int {
	items, ok := p.sequence(path, n)
	if !ok {
		return DefaultHealthCheckExpect()
	}
	if len(items) == 0 || len(items) > maxExpectStatuses {
		p.add(n, path, "must list 1 to %d statuses, got %d", maxExpectStatuses, len(items))
		return DefaultHealthCheckExpect()
	}
	var out []int
	for i, item := range items {
		s, ok := p.integer(index(path, i), item, minHealthCheckStatus, maxHealthCheckStatus)
		if !ok {
			continue
		}
		if slices.Contains(out, int(s)) {
			p.add(item, index(path, i), "duplicate status %d", s)
			continue
		}
		out = append(out, int(s))
	}
	slices.Sort(out)
	return out
}

// outlierDetection reads `outlier_detection`; null or {} reads as every
// default.
func (p *parser) outlierDetection(path string, n *yaml.Node) *OutlierDetection {
	od := defaultOutlierDetection()
	f, ok := p.block(path, n, outlierDetectionBlock)
	if !ok {
		return od
	}
	bad := p.bind(f, n, path, outlierDetectionBlock, od)
	if !bad["base_ejection_time"] && !bad["max_ejection_time"] && od.MaxEjectionTime < od.BaseEjectionTime {
		if v := f["max_ejection_time"]; v != nil {
			was := od.BaseEjectionTime.String()
			if f["base_ejection_time"] == nil {
				was += ", the default"
			}
			p.add(v, key(path, "max_ejection_time"), "must be at least base_ejection_time (%s), got %s", was, describe(v))
		} else {
			v := f["base_ejection_time"]
			p.add(v, key(path, "base_ejection_time"), "must be at most max_ejection_time (%s, the default), got %s", od.MaxEjectionTime, describe(v))
		}
	}
	return od
}

// zones reads `zones`: local is required; failover zones are distinct and
// not the local one.
func (p *parser) zones(path string, n *yaml.Node) *Zones {
	z := defaultZones()
	f, ok := p.block(path, n, zonesBlock)
	if !ok {
		return z
	}
	p.bind(f, n, path, zonesBlock, z) // local and overprovisioning
	if v := f["failover"]; v != nil && !isNull(v) {
		items, ok := p.sequence(key(path, "failover"), v)
		if ok && len(items) > maxFailoverZones {
			p.add(v, key(path, "failover"), "must list at most %d zones, got %d", maxFailoverZones, len(items))
			items = nil
		}
		for i, item := range items {
			ip := index(key(path, "failover"), i)
			name, ok := p.zoneName(ip, item)
			switch {
			case !ok:
			case name == z.Local:
				p.add(item, ip, "%s is the local zone; list only other zones", quote(name))
			case slices.Contains(z.Failover, name):
				p.add(item, ip, "duplicate zone %s", quote(name))
			default:
				z.Failover = append(z.Failover, name)
			}
		}
	}
	return z
}

// zoneName reads a zone name: 1 to 64 of a-z, 0-9, "_", "." and "-" (the
// discovery firewall's rule for an instance's zone).
func (p *parser) zoneName(path string, n *yaml.Node) (string, bool) {
	s, ok := p.str(path, n)
	if !ok || !p.zone(path, n, s) {
		return "", false
	}
	return s, true
}

// zone reports whether s is a valid zone name, reporting it if not.
func (p *parser) zone(path string, n *yaml.Node, s string) bool {
	if !validName(s) {
		p.add(n, path, "%s", zoneProblem(s))
		return false
	}
	return true
}

// zoneProblem is the message of an invalid zone name s.
func zoneProblem(s string) string {
	return "zone " + nameRule + ", got " + quoteMax(s, 64)
}
