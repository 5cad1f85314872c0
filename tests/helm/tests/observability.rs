//! The observability files against the code (no cluster): docs/metrics.md names every
//! metric the binaries register (and no other), and the Grafana dashboard
//! (deploy/grafana/kruise-rs.json) and the chart's PrometheusRule (`prometheusRule.enabled`)
//! query only those. A renamed metric breaks a panel or an alert silently in a cluster;
//! here it fails, naming the query.

// A test file: its helpers fail the test on a missing checkout file, as the tests do.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use kruise_helm_tests::{helm_template, root};
use serde_json::Value;

/// docs/metrics.md's tables: metric name → type.
fn documented() -> BTreeMap<String, String> {
    let text = fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let start = text
        .find("<!-- metrics-table")
        .expect("metrics-table marker");
    let end = text.find("<!-- end of metrics-table").expect("end marker");
    text[start..end]
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_string(), cells.get(2)?.to_string()))
        })
        .collect()
}

/// Every `"kruise_..."` string literal in the crates' Rust code: the registered names.
fn registered_in_code() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).expect("readable dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).expect("readable source");
                for (i, _) in text.match_indices("\"kruise_") {
                    let rest = &text[i + 1..];
                    let len = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    if rest[len..].starts_with('"') {
                        out.insert(rest[..len].to_string());
                    }
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root().join("crates"), &mut out);
    out
}

const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
/// Operators and aggregations (which may be followed by `by (...)` rather than `(`).
const KEYWORDS: &[&str] = &[
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// The metric names a PromQL expression selects (functions, aggregations, label names,
/// label values, ranges and Grafana variables left out).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let skip_group = |i: &mut usize, open: char, close: char| {
        let mut depth = 0;
        while *i < chars.len() {
            let c = chars[*i];
            if c == '"' || c == '\'' || c == '`' {
                *i += 1;
                while *i < chars.len() && chars[*i] != c {
                    if chars[*i] == '\\' {
                        *i += 1;
                    }
                    *i += 1;
                }
            } else if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    *i += 1;
                    return;
                }
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            skip_group(&mut i, '{', '}');
        } else if c == '[' {
            skip_group(&mut i, '[', ']');
        } else if c == '"' || c == '\'' || c == '`' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += 1;
            }
            i += 1;
        } else if c == '$' || c.is_ascii_digit() || c == '.' {
            // A variable ($job) or a number/duration (0.99, 5m).
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let call = chars.get(j) == Some(&'(');
            if GROUPING.contains(&word.as_str()) {
                if call {
                    i = j;
                    skip_group(&mut i, '(', ')');
                }
            } else if !call && !KEYWORDS.contains(&word.as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The names in `expr` that none of our binaries exports (a histogram's `_bucket`, `_sum`
/// and `_count` series count as its own).
fn unknown_names(expr: &str, known: &BTreeMap<String, String>) -> Vec<String> {
    metric_names(expr)
        .into_iter()
        .filter(|name| {
            if known.contains_key(name) {
                return false;
            }
            !["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .and_then(|base| known.get(base))
                    .is_some_and(|t| t == "histogram")
            })
        })
        .collect()
}

#[test]
fn promql_names_are_found() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, webhook) (rate(kruise_webhook_request_duration_seconds_bucket{namespace=~"$namespace", job="a"}[$__rate_interval]) * on (instance, job) group_left () max by (instance, job) (kruise_build_info{binary="x"}))) > bool 0.5 offset 5m"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [
            "kruise_build_info",
            "kruise_webhook_request_duration_seconds_bucket"
        ]
    );
    assert_eq!(
        metric_names("sum(up) unless absent(kruise_leader)")
            .into_iter()
            .collect::<Vec<_>>(),
        ["kruise_leader", "up"]
    );
}

#[test]
fn docs_name_every_registered_metric_and_no_other() {
    let docs = documented();
    let code = registered_in_code();
    let documented_kruise: BTreeSet<String> = docs
        .keys()
        .filter(|n| n.starts_with("kruise_"))
        .cloned()
        .collect();
    assert_eq!(
        documented_kruise, code,
        "docs/metrics.md's tables against the \"kruise_*\" names in crates/"
    );
    // The prometheus crate's process collector (crates/kruise-runtime/src/metrics.rs).
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
    ] {
        assert!(docs.contains_key(name), "{name} in docs/metrics.md");
    }
    for (name, kind) in &docs {
        assert!(
            ["counter", "gauge", "histogram"].contains(&kind.as_str()),
            "{name}: type {kind:?}"
        );
        assert_eq!(
            name.ends_with("_total"),
            kind == "counter",
            "{name} ({kind}): counters and only counters end in _total"
        );
    }
}

#[test]
fn grafana_dashboard_is_well_formed_and_queries_only_our_metrics() {
    let path = root().join("deploy/grafana/kruise-rs.json");
    let dash: Value =
        serde_json::from_str(&fs::read_to_string(&path).expect("dashboard")).expect("JSON");
    assert_eq!(dash["uid"], "kruise-rs");
    assert!(dash["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(dash["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource", "namespace", "job"]);
    let known = documented();
    let panels = dash["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut rows = Vec::new();
    let mut unknown = Vec::new();
    let mut queries = 0;
    for panel in panels {
        let title = panel["title"].as_str().expect("every panel has a title");
        assert!(
            ids.insert(panel["id"].as_u64().expect("numeric id")),
            "duplicate id: {title}"
        );
        let grid = &panel["gridPos"];
        for k in ["h", "w", "x", "y"] {
            assert!(grid[k].is_u64(), "{title}: gridPos.{k}");
        }
        assert!(
            grid["x"].as_u64().unwrap_or(0) + grid["w"].as_u64().unwrap_or(0) <= 24,
            "{title}: wider than the 24 columns"
        );
        if panel["type"] == "row" {
            rows.push(title.to_string());
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{title}: templated datasource"
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no target");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            let expr = t["expr"].as_str().expect("expr");
            assert!(
                expr.contains("namespace=~\"$namespace\"") && expr.contains("job=~\"$job\""),
                "{title}: {expr} is not templated on namespace and job"
            );
            queries += 1;
            for name in unknown_names(expr, &known) {
                unknown.push(format!("{title}: {name} in {expr}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by our binaries: {unknown:#?}"
    );
    assert!(queries > 50, "{queries} queries");
    // One row per controller (its name in the title), and the node agent.
    let text = fs::read_to_string(root().join("docs/metrics.md")).expect("docs");
    for controller in text
        .split('`')
        .filter(|w| w.ends_with("-controller") && !w.contains(' '))
    {
        assert!(
            rows.iter().any(|r| r.contains(&format!("({controller})"))),
            "no row for {controller}: {rows:?}"
        );
    }
    assert!(rows.iter().any(|r| r.contains("daemon-agent")), "{rows:?}");
}

/// The alert rules of `prometheusRule.enabled`.
fn rendered_rules(set: &[&str]) -> Vec<Value> {
    helm_template(set)
        .expect("helm template")
        .into_iter()
        .filter(|o| o["kind"] == "PrometheusRule")
        .collect()
}

#[test]
fn prometheus_rule_is_off_by_default() {
    assert!(rendered_rules(&[]).is_empty());
}

#[test]
fn prometheus_rule_alerts_query_only_our_metrics() {
    let rules = rendered_rules(&[
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=prom",
    ]);
    assert_eq!(rules.len(), 1, "{rules:#?}");
    let rule = &rules[0];
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["namespace"], "kruise-system");
    assert_eq!(rule["metadata"]["labels"]["release"], "prom");
    let known = documented();
    let mut alerts = BTreeSet::new();
    let mut unknown = Vec::new();
    for group in rule["spec"]["groups"].as_array().expect("groups") {
        assert!(group["name"].is_string());
        for r in group["rules"].as_array().expect("rules") {
            let alert = r["alert"]
                .as_str()
                .expect("alerting rules only")
                .to_string();
            let expr = r["expr"].as_str().expect("expr");
            assert!(
                ["warning", "critical"].contains(&r["labels"]["severity"].as_str().unwrap_or("")),
                "{alert}: severity"
            );
            assert!(r["annotations"]["summary"].is_string(), "{alert}: summary");
            assert!(
                r["annotations"]["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("{{ $labels.")),
                "{alert}: description naming its series (Helm must not have eaten the template)"
            );
            assert!(r["for"].is_string(), "{alert}: for");
            for name in unknown_names(expr, &known) {
                unknown.push(format!("{alert}: {name} in {expr}"));
            }
            assert!(alerts.insert(alert.clone()), "duplicate {alert}");
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by our binaries: {unknown:#?}"
    );
    for wanted in [
        "KruiseControllerNoLeader",
        "KruiseWebhookErrors",
        "KruiseWebhookLatencyHigh",
        "KruiseReconcileErrors",
        "KruiseRolloutStalled",
    ] {
        assert!(alerts.contains(wanted), "{wanted} in {alerts:?}");
    }
}

#[test]
fn grafana_dashboard_configmap_ships_the_file() {
    let objs = helm_template(&["grafanaDashboard.enabled=true"]).expect("helm template");
    let cms: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(cms.len(), 1);
    let shipped: Value = serde_json::from_str(
        cms[0]["data"]["kruise-rs.json"]
            .as_str()
            .expect("kruise-rs.json"),
    )
    .expect("JSON");
    let file: Value = serde_json::from_str(
        &fs::read_to_string(root().join("deploy/grafana/kruise-rs.json")).expect("dashboard"),
    )
    .expect("JSON");
    assert_eq!(
        shipped, file,
        "the chart ships deploy/grafana/kruise-rs.json as is"
    );
    assert!(
        !helm_template(&[])
            .expect("helm template")
            .iter()
            .any(|o| o["metadata"]["labels"]["grafana_dashboard"] == "1"),
        "off by default"
    );
}
