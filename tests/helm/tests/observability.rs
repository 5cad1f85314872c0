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

/// The Prometheus `make test` builds (tests/cluster/build-prometheus.sh), if it is in the
/// cache already: this test does not build it.
fn cached_prometheus() -> Option<std::path::PathBuf> {
    let script = root().join("tests/cluster/build-prometheus.sh");
    let out = std::process::Command::new("sha256sum")
        .arg(&script)
        .output()
        .ok()?;
    let stamp: String = String::from_utf8_lossy(&out.stdout)
        .chars()
        .take(12)
        .collect();
    let cache = std::env::var_os("KRUISE_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(|d| std::path::PathBuf::from(d).join("kruise-rs"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/kruise-rs"))
        })?;
    let bin = cache.join(format!("prometheus-{stamp}/prometheus"));
    bin.is_file().then_some(bin)
}

/// One HTTP GET on 127.0.0.1:`port`; the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// Prometheus itself loads the rendered rules and evaluates every one without error
/// (what `promtool check rules` would say, and that the expressions run).
#[test]
fn prometheus_loads_and_evaluates_the_rules() {
    let Some(bin) = cached_prometheus() else {
        eprintln!("no Prometheus built (tests/cluster/build-prometheus.sh): skipped");
        return;
    };
    let rules = rendered_rules(&["prometheusRule.enabled=true"]);
    let dir = std::env::temp_dir().join(format!("kruise-rules-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    // JSON is YAML: Prometheus reads both files as they are written here.
    fs::write(
        dir.join("rules.yml"),
        serde_json::json!({"groups": rules[0]["spec"]["groups"]}).to_string(),
    )
    .expect("rules file");
    fs::write(
        dir.join("prometheus.yml"),
        serde_json::json!({"global": {"evaluation_interval": "1s"}, "rule_files": ["rules.yml"]})
            .to_string(),
    )
    .expect("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = std::process::Command::new(&bin)
        .current_dir(&dir)
        .arg("--config.file=prometheus.yml")
        .arg("--storage.tsdb.path=data")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(dir.join("log")).expect("log"))
        .spawn()
        .expect("start prometheus");
    let mut verdict = Err("Prometheus did not answer within 30s".to_string());
    for _ in 0..60 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        if let Ok(Some(status)) = child.try_wait() {
            verdict = Err(format!(
                "Prometheus exited ({status}): {}",
                fs::read_to_string(dir.join("log")).unwrap_or_default()
            ));
            break;
        }
        let Some(body) = http_get(port, "/api/v1/rules") else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        let states: Vec<(String, String, String)> = json["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_string(),
                    r["health"].as_str().unwrap_or_default().to_string(),
                    r["lastError"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        if states.len() == 5 && states.iter().all(|(_, health, _)| health != "unknown") {
            let bad: Vec<_> = states.iter().filter(|(_, h, _)| h != "ok").collect();
            verdict = if bad.is_empty() {
                Ok(())
            } else {
                Err(format!("{bad:?}"))
            };
            break;
        }
        verdict = Err(format!("not evaluated yet: {states:?}"));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = fs::remove_dir_all(&dir);
    verdict.expect("every rule loads and evaluates");
}
