import yaml, sys
src = yaml.safe_load(open('levee.rules_test.yaml'))
# the firing exp_alerts of each alert in the 5 s file (its last firing check)
firing = {}
for tc in src['tests']:
    for a in tc['alert_rule_test']:
        if a['exp_alerts']:
            firing[a['alertname']] = a['exp_alerts']
FAULT, END = 600, 1800   # the fault at 10 min; 30 min of series
I = int(sys.argv[1])
n = END // I             # samples after the first
k0 = FAULT // I          # the index of the first sample at the fault
L = 'job="levee",instance="levee:9901"'
def gauge(before, after):      # before the fault, from it on
    return f"{before}x{k0-1} {after}x{n-k0+1}"
GAP = k0 + 2 if I == 60 else None  # at 60 s, the second scrape after the fault is missed
def counter(r_before, r_after):  # rates per second; the counter never resets
    vb, va = r_before * I, r_after * I
    vals, v = [], 0.0
    for i in range(n + 1):
        if i > 0:
            v += vb if i < k0 else va
        vals.append('_' if i == GAP else f'{v:g}')
    return ' '.join(vals)
def young(r):                  # a series born at the fault's first scrape after it
    return f"_x{k0} {r*I:g}+{r*I:g}x{n-k0-1}"
def steady(r):
    return f"0+{r*I:g}x{n}"
tests = []
def case(name, alert, series, fire_after, extra_labels=None, only=None):
    exp = firing[alert]
    if only:
        exp = [e for e in exp if e['exp_labels'].get('upstream') == only]
    tests.append({'name': f'{alert} at a {I} s interval: {name}', 'interval': f'{I}s',
        'input_series': [{'series': s, 'values': v} for s, v in series],
        'alert_rule_test': [
            {'eval_time': f'{FAULT - I}s', 'alertname': alert, 'exp_alerts': []},
            {'eval_time': f'{FAULT + fire_after}s', 'alertname': alert, 'exp_alerts': exp},
            {'eval_time': f'{END - I}s', 'alertname': alert, 'exp_alerts': exp},
        ]})
# fire_after: the bound promised at this interval (see the file's header)
B = 2 * I + 20 if I >= 15 else 60
case('every endpoint of api unhealthy; a healthy upstream quiet', 'LeveeUpstreamDown', [
    (f'levee_upstream_endpoints{{{L},upstream="api",state="healthy"}}', gauge(3, 0)),
    (f'levee_upstream_endpoints{{{L},upstream="api",state="unhealthy"}}', gauge(0, 3)),
    (f'levee_upstream_endpoints{{{L},upstream="web",state="healthy"}}', gauge(2, 2)),
], B)
case('api answers 20 % 5xx (a 5xx series born at the fault); 1 % errors and a trickle quiet', 'LeveeHighErrorRate', [
    (f'levee_requests_total{{{L},route="api",upstream="api",code="200"}}', counter(20, 16)),
    (f'levee_requests_total{{{L},route="api",upstream="api",code="502"}}', young(4)),
    (f'levee_requests_total{{{L},route="web",upstream="web",code="200"}}', steady(99)),
    (f'levee_requests_total{{{L},route="web",upstream="web",code="500"}}', steady(1)),
    (f'levee_requests_total{{{L},route="tiny",upstream="tiny",code="503"}}', steady(0.1)),
], max(B, 120))
case('route api sheds 20 %; memory shedding quiet', 'LeveeOverloadShedding', [
    (f'levee_requests_total{{{L},route="api",upstream="api",code="200"}}', counter(100, 80)),
    (f'levee_shed_total{{{L},route="api",reason="queue_full"}}', counter(0, 20)),
    (f'levee_requests_total{{{L},route="big",upstream="big",code="200"}}', steady(100)),
    (f'levee_shed_total{{{L},route="big",reason="memory_pressure"}}', steady(20)),
], B)
case('app storm answered 429 at 20/s; a busy app near its limit and a calm one quiet', 'LeveeAppThrottled', [
    (f'levee_app_requests_total{{{L},app="storm",class="2xx"}}', steady(10)),
    (f'levee_app_throttled_total{{{L},app="storm"}}', counter(0, 20)),
    (f'levee_app_requests_total{{{L},app="busy",class="2xx"}}', steady(1000)),
    (f'levee_app_throttled_total{{{L},app="busy"}}', steady(5)),
    (f'levee_app_requests_total{{{L},app="calm",class="2xx"}}', steady(0.6)),
    (f'levee_app_throttled_total{{{L},app="calm"}}', steady(0.4)),
], B)
case('above the soft watermark; another levee quiet', 'LeveeMemoryPressure', [
    (f'levee_memory_pressure_level{{{L}}}', gauge(0, 1)),
    ('levee_memory_pressure_level{job="levee",instance="levee:9902"}', gauge(0, 0)),
], B)
case('a refused update of feed; a clean feed quiet', 'LeveeDiscoveryQuarantine', [
    (f'levee_discovery_updates_total{{{L},upstream="feed",result="refused"}}', f"0x{k0-1} 1x{n-k0+1}"),
    (f'levee_discovery_rejected_total{{{L},upstream="clean",reason="bad_address"}}', f"0x{n}"),
    (f'levee_discovery_updates_total{{{L},upstream="clean",result="refused"}}', f"0x{n}"),
], B, only='feed')
tests[-1]['alert_rule_test'][2]['eval_time'] = f'{FAULT + 540}s'   # within the 10 min it lasts
case('a refused reload; another levee quiet', 'LeveeConfigReloadFailed', [
    (f'levee_config_last_reload_success{{{L}}}', gauge(1, 0)),
    ('levee_config_last_reload_success{job="levee",instance="levee:9902"}', gauge(1, 1)),
], B)
case('a rollback and the last good configuration serving; another levee quiet', 'LeveeRolledBack', [
    (f'levee_rollbacks_total{{{L},kind="reload"}}', f"0x{k0-1} 1x{n-k0+1}"),
    (f'levee_rolled_back{{{L}}}', gauge(0, 1)),
    ('levee_rollbacks_total{job="levee",instance="levee:9902",kind="reload"}', f"0x{n}"),
    ('levee_rolled_back{job="levee",instance="levee:9902"}', gauge(0, 0)),
], B)
head = f"""# promtool unit tests of levee.rules.yaml at a {I} s scrape and evaluation
# interval (deploy/prometheus's TestAlertRules runs them; the 5 s ones are
# levee.rules_test.yaml). Generated by deploy/prometheus/gen_interval_tests.py {I}: every
# alert's fault begins at {FAULT} s; the alert is silent a scrape before, firing
# {B} s after (two intervals and its `for`; LeveeHighErrorRate, whose 5xx
# series is born at the fault and diluted over [3m]: {max(B,120)} s) and still
# at {END - I} s; series of normal operation beside it never make it fire.
""" + ("# At 60 s the second scrape after the fault is missing from the fault's\n# counters (a late or failed scrape): a [3m] range still holds two samples.\n" if I == 60 else "")
doc = {'rule_files': ['levee.rules.yaml'], 'evaluation_interval': f'{I}s', 'tests': tests}
open(f'levee.rules_test_{I}s.yaml', 'w').write(head + yaml.safe_dump(doc, sort_keys=False, width=200))
