//! What an apiserver error means to a controller: the status codes every controller reads
//! (404 not found, 409 conflict or already exists, 410 gone), in one place instead of a
//! `kube::Error::Api(s) if s.code == …` match in every file.
//!
//! 409 has two meanings, told apart by the status reason (as apimachinery's
//! `k8s.io/apimachinery/pkg/api/errors` `IsConflict` / `IsAlreadyExists` do): an update
//! whose resourceVersion or precondition no longer holds (`Conflict`), and a create of a
//! name that exists (`AlreadyExists`). [`is_conflict`] takes any 409, as a retry after a
//! fresh read is right for both; [`is_already_exists`] only the second.

/// The apiserver's status code, when the error is an API answer.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// 404: the object (or its namespace, or its kind) is not there.
pub fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

/// 409 of either kind: re-read and decide again.
pub fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// 409 `AlreadyExists`: a create found the name taken.
pub fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// 410: a watch's resourceVersion is too old; list again.
pub fn is_gone(e: &kube::Error) -> bool {
    status_code(e) == Some(410)
}

/// `Ok(None)` for a 404, the value otherwise: a read of something that may be gone.
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "message": "m", "reason": reason, "code": code}))
            .expect("status"),
        )
    }

    #[test]
    fn codes_are_read_from_api_errors_only() {
        assert!(is_not_found(&api(404, "NotFound")));
        assert!(!is_not_found(&api(409, "Conflict")));
        assert!(is_conflict(&api(409, "Conflict")));
        assert!(is_conflict(&api(409, "AlreadyExists")));
        assert!(is_already_exists(&api(409, "AlreadyExists")));
        assert!(!is_already_exists(&api(409, "Conflict")));
        assert!(is_gone(&api(410, "Expired")));
        let not_api = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(!is_not_found(&not_api) && !is_conflict(&not_api) && !is_gone(&not_api));
        assert_eq!(status_code(&not_api), None);
    }

    #[test]
    fn ignore_not_found_keeps_other_errors() {
        assert_eq!(ignore_not_found(Ok::<_, kube::Error>(3)).unwrap(), Some(3));
        assert_eq!(
            ignore_not_found::<u8>(Err(api(404, "NotFound"))).unwrap(),
            None
        );
        assert!(ignore_not_found::<u8>(Err(api(409, "Conflict"))).is_err());
    }
}
