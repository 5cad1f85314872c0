//! `resourcesPolicy` (upstream since v1.8; `openkruise/kruise v1.9.0
//! pkg/webhook/pod/mutating/sidecarset_resources.go` `applyResourcesPolicy`): a sidecar's resources derived at injection
//! from the app containers it serves, e.g. `limits.cpu: max(cpu*50%, 50m)`.
//!
//! Target containers are the Pod's own containers (and native-sidecar init containers,
//! `restartPolicy: Always`) whose names match `targetContainersNameRegex`, never the
//! sidecars SidecarSets inject. Their limits and requests are aggregated by `sum` or
//! `max`; a limit is only aggregated when every target has one (one unlimited container
//! makes the aggregate unlimited, and the sidecar's limit is then left unset); a missing
//! request counts as 0.
//!
//! Expressions: `+ - * /`, parentheses, unary minus, `max(a, b, ...)`, `min(...)`,
//! numbers (`0.5`, `42`), percentages (`50%` is 0.5), Kubernetes quantities (`50m`,
//! `100Mi`, `1Gi`, `1e3`) and the variable `cpu` or `memory`, bound to the aggregate of
//! the field being computed. All values are in base units (cores, bytes); CPU results
//! are rounded to the millicore, memory to the byte.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_api::apps_v1alpha1::{ResourcesPolicy, TargetContainerMode};
use kruise_api::quantity;

/// The resources the policy gives a sidecar, from the target containers.
pub fn resources_for(
    policy: &ResourcesPolicy,
    targets: &[&Container],
) -> Result<ResourceRequirements, String> {
    if targets.is_empty() {
        return Err(format!(
            "no containers match the regex pattern {:?}",
            policy.target_containers_name_regex
        ));
    }
    let aggregate = Aggregate::of(targets, policy.target_container_mode);
    let mut out = ResourceRequirements::default();
    if let Some(exprs) = &policy.resource_expr.limits {
        let mut limits = BTreeMap::new();
        for (name, expr, value) in [
            ("cpu", &exprs.cpu, aggregate.limit_cpu),
            ("memory", &exprs.memory, aggregate.limit_memory),
        ] {
            // An unlimited aggregate leaves the sidecar unlimited too.
            if let (false, Some(value)) = (expr.is_empty(), value) {
                limits.insert(name.to_string(), quantity(name, expr, value, "limits")?);
            }
        }
        if !limits.is_empty() {
            out.limits = Some(limits);
        }
    }
    if let Some(exprs) = &policy.resource_expr.requests {
        let mut requests = BTreeMap::new();
        for (name, expr, value) in [
            ("cpu", &exprs.cpu, aggregate.request_cpu),
            ("memory", &exprs.memory, aggregate.request_memory),
        ] {
            if !expr.is_empty() {
                requests.insert(name.to_string(), quantity(name, expr, value, "requests")?);
            }
        }
        if !requests.is_empty() {
            out.requests = Some(requests);
        }
    }
    Ok(out)
}

fn quantity(resource: &str, expr: &str, aggregate: f64, field: &str) -> Result<Quantity, String> {
    let value = evaluate(expr, aggregate)
        .map_err(|e| format!("resourceExpr.{field}.{resource} {expr:?}: {e}"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "resourceExpr.{field}.{resource} {expr:?} evaluates to {value}, not a quantity"
        ));
    }
    Ok(Quantity(if resource == "cpu" {
        format!("{}m", (value * 1000.0).round() as i64)
    } else {
        format_bytes((value).round() as i64)
    }))
}

fn format_bytes(bytes: i64) -> String {
    for (suffix, unit) in [("Gi", 1i64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Aggregated target resources, in cores and bytes; `None` limits are unlimited.
struct Aggregate {
    limit_cpu: Option<f64>,
    limit_memory: Option<f64>,
    request_cpu: f64,
    request_memory: f64,
}

impl Aggregate {
    fn of(targets: &[&Container], mode: TargetContainerMode) -> Self {
        let get = |c: &Container, limits: bool, name: &str| -> Option<f64> {
            let r = c.resources.as_ref()?;
            let list = if limits { &r.limits } else { &r.requests };
            quantity::parse(&list.as_ref()?.get(name)?.0).ok()
        };
        let fold = |values: Vec<f64>| match mode {
            TargetContainerMode::Sum => values.iter().sum(),
            TargetContainerMode::Max => values.iter().copied().fold(0.0, f64::max),
        };
        let limit = |name: &str| -> Option<f64> {
            let values: Option<Vec<f64>> = targets.iter().map(|c| get(c, true, name)).collect();
            values.map(fold)
        };
        let request = |name: &str| -> f64 {
            fold(
                targets
                    .iter()
                    .map(|c| get(c, false, name).unwrap_or(0.0))
                    .collect(),
            )
        };
        Aggregate {
            limit_cpu: limit("cpu"),
            limit_memory: limit("memory"),
            request_cpu: request("cpu"),
            request_memory: request("memory"),
        }
    }
}

/// Evaluates an expression with its variable (`cpu` or `memory`) bound to `variable`.
pub fn evaluate(expr: &str, variable: f64) -> Result<f64, String> {
    let tokens = tokenize(expr)?;
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        variable,
        depth: 0,
    };
    let value = parser.expr()?;
    match parser.tokens.get(parser.at) {
        None => Ok(value),
        Some(t) => Err(format!("unexpected {t:?}")),
    }
}

/// Checks an expression's syntax (admission), naming what is wrong.
pub fn check(expr: &str) -> Result<(), String> {
    evaluate(expr, 1.0).map(|_| ())
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Ident(String),
    Op(char),
}

fn tokenize(expr: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/(),".contains(c) {
            tokens.push(Token::Op(c));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            // An exponent: e/E followed by digits (optionally signed).
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    while j < chars.len() && chars[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let number: String = chars[start..i].iter().collect();
            if i < chars.len() && chars[i] == '%' {
                let v: f64 = number
                    .parse()
                    .map_err(|_| format!("{number:?} is not a number"))?;
                tokens.push(Token::Number(v / 100.0));
                i += 1;
                continue;
            }
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            let literal: String = chars[start..i].iter().collect();
            tokens.push(Token::Number(quantity::parse(&literal)?));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(tokens)
}

/// How deeply parentheses, function calls and unary minuses may nest. The parser
/// recurses once per level; without a bound, an expression of a few hundred thousand
/// `(` (a SidecarSet may carry one) overflows the webhook thread's stack and aborts
/// the process.
const MAX_DEPTH: usize = 64;

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
    variable: f64,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            if self.eat('+') {
                value += self.term()?;
            } else if self.eat('-') {
                value -= self.term()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            if self.eat('*') {
                value *= self.unary()?;
            } else if self.eat('/') {
                let divisor = self.unary()?;
                if divisor == 0.0 {
                    return Err("division by zero".into());
                }
                value /= divisor;
            } else {
                return Ok(value);
            }
        }
    }

    /// Every level of nesting passes through here.
    fn unary(&mut self) -> Result<f64, String> {
        if self.depth == MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} levels deep"));
        }
        self.depth += 1;
        let value = if self.eat('-') {
            self.unary().map(|v| -v)
        } else {
            self.primary()
        };
        self.depth -= 1;
        value
    }

    fn primary(&mut self) -> Result<f64, String> {
        let token = self.peek().cloned().ok_or("unexpected end of expression")?;
        self.at += 1;
        match token {
            Token::Number(v) => Ok(v),
            Token::Op('(') => {
                let v = self.expr()?;
                if !self.eat(')') {
                    return Err("missing )".into());
                }
                Ok(v)
            }
            Token::Ident(name) if name == "cpu" || name == "memory" => Ok(self.variable),
            Token::Ident(name) if name == "max" || name == "min" => {
                if !self.eat('(') {
                    return Err(format!("{name} needs (arguments)"));
                }
                let mut args = vec![self.expr()?];
                while self.eat(',') {
                    args.push(self.expr()?);
                }
                if !self.eat(')') {
                    return Err(format!("missing ) after the arguments of {name}"));
                }
                let pick = if name == "max" { f64::max } else { f64::min };
                Ok(args.into_iter().reduce(pick).unwrap_or(0.0))
            }
            Token::Ident(name) => Err(format!(
                "unknown name {name:?} (use cpu, memory, max or min)"
            )),
            Token::Op(op) => Err(format!("unexpected {op:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps_v1alpha1::{ResourceExpr, ResourceExprValues};

    fn container(name: &str, limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        let list = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                limits: list(limits),
                requests: list(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn policy(mode: TargetContainerMode, cpu: &str, memory: &str) -> ResourcesPolicy {
        let values = ResourceExprValues {
            cpu: cpu.into(),
            memory: memory.into(),
        };
        ResourcesPolicy {
            target_container_mode: mode,
            target_containers_name_regex: ".*".into(),
            resource_expr: ResourceExpr {
                limits: Some(values.clone()),
                requests: Some(values),
            },
        }
    }

    fn get(r: &Option<BTreeMap<String, Quantity>>, name: &str) -> Option<String> {
        r.as_ref()?.get(name).map(|q| q.0.clone())
    }

    #[test]
    fn expressions_follow_precedence_functions_and_percentages() {
        assert_eq!(evaluate("cpu*50%", 0.6).unwrap(), 0.3);
        assert_eq!(evaluate("max(cpu*50%, 50m)", 0.06).unwrap(), 0.05);
        assert_eq!(evaluate("1 + 2 * 3", 0.0).unwrap(), 7.0);
        assert_eq!(evaluate("(1 + 2) * 3", 0.0).unwrap(), 9.0);
        assert_eq!(evaluate("-cpu + 2", 0.5).unwrap(), 1.5);
        assert_eq!(evaluate("min(3, 1, 2)", 0.0).unwrap(), 1.0);
        assert_eq!(
            evaluate("min(max(max(max(0.5,0.5*cpu),cpu-1.0),cpu-1.0),3.0)", 10.0).unwrap(),
            3.0
        );
        assert_eq!(
            evaluate("memory / 2", 200.0 * 1048576.0).unwrap(),
            100.0 * 1048576.0
        );
        assert_eq!(evaluate("200Mi", 0.0).unwrap(), 200.0 * 1048576.0);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        assert!(check("cpu *").unwrap_err().contains("end of expression"));
        assert!(check("max(cpu, 1").unwrap_err().contains("missing )"));
        assert!(
            check("gpu * 2")
                .unwrap_err()
                .contains("unknown name \"gpu\"")
        );
        assert!(
            check("cpu $ 2")
                .unwrap_err()
                .contains("unexpected character")
        );
        assert!(check("cpu / 0").unwrap_err().contains("division by zero"));
        assert!(check("1 2").is_err());
    }

    /// Found while fuzzing the evaluator (fuzz/fuzz_targets/resources_policy.rs): the
    /// recursion had no bound, so deep nesting overflowed the stack (an abort, not a
    /// panic a webhook could answer). Run on a small stack, like a webhook thread's.
    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let parens = format!("{}1{}", "(".repeat(200_000), ")".repeat(200_000));
                let minuses = format!("{}1", "-".repeat(200_000));
                let calls = format!("{}1{}", "max(".repeat(50_000), ")".repeat(50_000));
                [parens, minuses, calls].map(|e| check(&e))
            })
            .unwrap()
            .join()
            .unwrap();
        for result in deep {
            assert!(result.unwrap_err().contains("nested more than 64 levels"));
        }
        let ok = format!("{}cpu{}", "(".repeat(60), ")".repeat(60));
        assert_eq!(evaluate(&ok, 2.0).unwrap(), 2.0);
        assert_eq!(evaluate("--cpu", 2.0).unwrap(), 2.0);
    }

    /// Upstream's documented example: (200m + 400m) * 50% = 300m limit, (50m + 100m) *
    /// 50% = 75m request; memory constants as given.
    #[test]
    fn sum_mode_aggregates_the_targets() {
        let a = container(
            "app1",
            &[("cpu", "200m"), ("memory", "200Mi")],
            &[("cpu", "50m"), ("memory", "100Mi")],
        );
        let b = container(
            "app2",
            &[("cpu", "400m"), ("memory", "400Mi")],
            &[("cpu", "100m"), ("memory", "200Mi")],
        );
        let mut p = policy(TargetContainerMode::Sum, "cpu*50%", "200Mi");
        p.resource_expr.requests.as_mut().unwrap().memory = "100Mi".into();
        let r = resources_for(&p, &[&a, &b]).unwrap();
        assert_eq!(get(&r.limits, "cpu").as_deref(), Some("300m"));
        assert_eq!(get(&r.limits, "memory").as_deref(), Some("200Mi"));
        assert_eq!(get(&r.requests, "cpu").as_deref(), Some("75m"));
        assert_eq!(get(&r.requests, "memory").as_deref(), Some("100Mi"));
    }

    #[test]
    fn max_mode_takes_the_largest_and_memory_expressions_use_memory() {
        let a = container("a", &[("cpu", "1"), ("memory", "1Gi")], &[("cpu", "500m")]);
        let b = container("b", &[("cpu", "2"), ("memory", "512Mi")], &[]);
        let p = policy(TargetContainerMode::Max, "cpu/4", "memory/2");
        let r = resources_for(&p, &[&a, &b]).unwrap();
        assert_eq!(get(&r.limits, "cpu").as_deref(), Some("500m"));
        assert_eq!(get(&r.limits, "memory").as_deref(), Some("512Mi"));
        assert_eq!(get(&r.requests, "cpu").as_deref(), Some("125m"));
        assert_eq!(
            get(&r.requests, "memory").as_deref(),
            Some("0"),
            "no requests: 0"
        );
    }

    #[test]
    fn one_unlimited_target_leaves_the_limit_unset() {
        let a = container("a", &[("cpu", "1")], &[]);
        let b = container("b", &[], &[]);
        let p = policy(TargetContainerMode::Sum, "cpu*50%", "memory");
        let r = resources_for(&p, &[&a, &b]).unwrap();
        assert_eq!(r.limits, None);
        assert_eq!(get(&r.requests, "cpu").as_deref(), Some("0m"));
    }

    #[test]
    fn no_target_or_a_negative_result_is_an_error() {
        let p = policy(TargetContainerMode::Sum, "cpu", "");
        assert!(
            resources_for(&p, &[])
                .unwrap_err()
                .contains("no containers match")
        );
        let a = container("a", &[("cpu", "500m")], &[]);
        let p = policy(TargetContainerMode::Sum, "cpu - 1", "");
        assert!(
            resources_for(&p, &[&a])
                .unwrap_err()
                .contains("evaluates to -0.5")
        );
    }
}
