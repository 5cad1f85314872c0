//! Admission field errors, printed the way the apiserver prints them
//! (`spec.replicas: Invalid value: -1: must be greater than or equal to 0`), and the
//! answers every validating webhook gives with them.

use kube::core::admission::AdmissionResponse;

/// One field error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub kind: ErrorKind,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Invalid value`, with the offending value when there is one to show.
    Invalid(Option<String>),
    Required,
    Forbidden,
    /// `Unsupported value`, with the value.
    NotSupported(Option<String>),
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, value) = match &self.kind {
            ErrorKind::Invalid(v) => ("Invalid value", v.as_deref()),
            ErrorKind::Required => ("Required value", None),
            ErrorKind::Forbidden => ("Forbidden", None),
            ErrorKind::NotSupported(v) => ("Unsupported value", v.as_deref()),
        };
        match value {
            Some(v) => write!(f, "{}: {kind}: {v}: {}", self.path, self.detail),
            None => write!(f, "{}: {kind}: {}", self.path, self.detail),
        }
    }
}

impl FieldError {
    fn new(path: impl Into<String>, kind: ErrorKind, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            kind,
            detail: detail.into(),
        }
    }
}

/// `<path>: Invalid value: <value>: <detail>`.
pub fn invalid(
    path: impl Into<String>,
    value: impl std::fmt::Display,
    detail: impl Into<String>,
) -> FieldError {
    FieldError::new(path, ErrorKind::Invalid(Some(value.to_string())), detail)
}

/// `<path>: Invalid value: <detail>` (the detail already names the value, or there is none).
pub fn invalid_detail(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(path, ErrorKind::Invalid(None), detail)
}

/// `<path>: Required value: <detail>`.
pub fn required(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(path, ErrorKind::Required, detail)
}

/// `<path>: Forbidden: <detail>`.
pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(path, ErrorKind::Forbidden, detail)
}

/// `<path>: Unsupported value: <value>: <detail>`.
pub fn not_supported(
    path: impl Into<String>,
    value: impl std::fmt::Display,
    detail: impl Into<String>,
) -> FieldError {
    FieldError::new(
        path,
        ErrorKind::NotSupported(Some(value.to_string())),
        detail,
    )
}

/// `<path>: Unsupported value: <detail>`.
pub fn not_supported_detail(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(path, ErrorKind::NotSupported(None), detail)
}

/// The aggregate message: one error as is, several as `[a, b]` (like `ToAggregate()`).
pub fn aggregate(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The apiserver's answer to an invalid object: HTTP 422, reason `Invalid`, the
/// aggregated field errors as the message.
pub fn deny_invalid(response: AdmissionResponse, errors: &[FieldError]) -> AdmissionResponse {
    let mut denied = response.deny(aggregate(errors));
    denied.result.code = 422;
    denied.result.reason = "Invalid".into();
    denied
}

/// A refused request (deletion protection, policy): HTTP 403 with `message`.
pub fn deny_forbidden(response: AdmissionResponse, message: impl ToString) -> AdmissionResponse {
    let mut denied = response.deny(message);
    denied.result.code = 403;
    denied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_like_the_apiserver() {
        assert_eq!(
            invalid("spec.replicas", -1, "must be greater than or equal to 0").to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            invalid_detail("spec.selector", "empty selector is invalid for statefulset")
                .to_string(),
            "spec.selector: Invalid value: empty selector is invalid for statefulset"
        );
        assert_eq!(
            required("spec.selector", "").to_string(),
            "spec.selector: Required value: "
        );
        assert_eq!(
            forbidden("spec", "updates to x are forbidden").to_string(),
            "spec: Forbidden: updates to x are forbidden"
        );
        assert_eq!(
            not_supported("spec.p", "\"X\"", "supported values: \"A\"").to_string(),
            "spec.p: Unsupported value: \"X\": supported values: \"A\""
        );
    }

    #[test]
    fn several_errors_aggregate_in_brackets() {
        let one = required("a", "x");
        let two = forbidden("b", "y");
        assert_eq!(
            aggregate(std::slice::from_ref(&one)),
            "a: Required value: x"
        );
        assert_eq!(
            aggregate(&[one, two]),
            "[a: Required value: x, b: Forbidden: y]"
        );
    }
}
