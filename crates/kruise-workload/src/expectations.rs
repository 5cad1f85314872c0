//! Expectations: what this controller just did and the cache has not shown yet.
//!
//! After creating or deleting a Pod the controller records it against the owner's UID;
//! the owner is not scaled again until the cache reflects every recorded action (or a
//! timeout passes, which is logged as a leak). Without this a stale cache makes the
//! controller create the same Pods twice. Satisfaction is checked against the cache at
//! the start of each reconcile, so no watch-event plumbing is needed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

/// How long an unobserved action blocks its owner before it is given up on.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expected {
    /// An object created with this name must appear.
    Created(String),
    /// An object created at this resourceVersion must appear, or the cache must have
    /// moved past it: an object deleted right after its creation (by someone else) never
    /// shows up, and must not hold its owner until the timeout.
    CreatedAt {
        name: String,
        resource_version: String,
    },
    /// An object deleted with this name must disappear (or be terminating).
    Deleted(String),
    /// An object patched to this resourceVersion must be seen at it or later.
    Updated {
        name: String,
        resource_version: String,
    },
}

/// What the cache currently says about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Not in the cache; `cache_resource_version` is how far the cache has read (the
    /// highest resourceVersion of any event it has applied), when known.
    Absent {
        cache_resource_version: Option<String>,
    },
    Terminating {
        resource_version: String,
    },
    Present {
        resource_version: String,
    },
}

impl Observed {
    /// What the cache shows of an object (`None`: not in the cache).
    pub fn of<K: kube::Resource>(object: Option<&K>) -> Self {
        Self::in_cache(object, None)
    }

    /// Like [`Observed::of`], knowing how far the cache has read.
    pub fn in_cache<K: kube::Resource>(
        object: Option<&K>,
        cache_resource_version: Option<String>,
    ) -> Self {
        match object {
            None => Observed::Absent {
                cache_resource_version,
            },
            Some(o) => {
                let resource_version = o.meta().resource_version.clone().unwrap_or_default();
                if o.meta().deletion_timestamp.is_some() {
                    Observed::Terminating { resource_version }
                } else {
                    Observed::Present { resource_version }
                }
            }
        }
    }
}

/// Pending expectations per owner UID; cheap to clone, shared by a controller's workers.
#[derive(Clone, Default)]
pub struct Expectations {
    inner: Arc<Mutex<HashMap<String, BTreeMap<Expected, Timestamp>>>>,
    timeout: Option<Duration>,
}

impl Expectations {
    pub fn new(timeout: Duration) -> Self {
        Expectations {
            inner: Default::default(),
            timeout: Some(timeout),
        }
    }

    pub fn expect(&self, owner_uid: &str, what: Expected, now: Timestamp) {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(owner_uid.to_string())
            .or_default()
            .insert(what, now);
    }

    /// Drops what the cache now shows and what timed out; returns what is still pending.
    pub fn pending(
        &self,
        owner_uid: &str,
        now: Timestamp,
        observe: impl Fn(&str) -> Observed,
    ) -> Vec<Expected> {
        let timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let mut all = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(owner) = all.get_mut(owner_uid) else {
            return Vec::new();
        };
        owner.retain(|what, since| {
            let satisfied = match what {
                Expected::Created(name) => !matches!(observe(name), Observed::Absent { .. }),
                Expected::CreatedAt {
                    name,
                    resource_version,
                } => match observe(name) {
                    Observed::Absent {
                        cache_resource_version: Some(at),
                    } => resource_version_at_least(&at, resource_version),
                    Observed::Absent { .. } => false,
                    _ => true,
                },
                Expected::Deleted(name) => !matches!(observe(name), Observed::Present { .. }),
                Expected::Updated {
                    name,
                    resource_version,
                } => match observe(name) {
                    Observed::Absent { .. } => true,
                    Observed::Terminating {
                        resource_version: seen,
                    }
                    | Observed::Present {
                        resource_version: seen,
                    } => resource_version_at_least(&seen, resource_version),
                },
            };
            let timed_out = now.duration_since(*since).unsigned_abs() >= timeout;
            if timed_out && !satisfied {
                tracing::warn!(
                    owner = owner_uid,
                    ?what,
                    "expectation not observed in time; giving up on it"
                );
            }
            !satisfied && !timed_out
        });
        let pending: Vec<Expected> = owner.keys().cloned().collect();
        if owner.is_empty() {
            all.remove(owner_uid);
        }
        pending
    }

    /// Drops one expectation (the action failed, so the cache will never show it).
    pub fn forget_one(&self, owner_uid: &str, what: &Expected) {
        let mut all = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(owner) = all.get_mut(owner_uid) {
            owner.remove(what);
            if owner.is_empty() {
                all.remove(owner_uid);
            }
        }
    }

    /// Forgets an owner (it was deleted).
    pub fn forget(&self, owner_uid: &str) {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(owner_uid);
    }
}

/// resourceVersions are opaque, but the apiserver's are etcd revisions: compare
/// numerically when both parse, otherwise require equality.
fn resource_version_at_least(seen: &str, wanted: &str) -> bool {
    match (seen.parse::<u64>(), wanted.parse::<u64>()) {
        (Ok(s), Ok(w)) => s >= w,
        _ => seen == wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn creations_block_until_seen() {
        let e = Expectations::new(DEFAULT_TIMEOUT);
        e.expect("u", Expected::Created("p1".into()), t(0));
        e.expect("u", Expected::Created("p2".into()), t(0));
        let pending = e.pending("u", t(1), |n| {
            if n == "p1" {
                Observed::Present {
                    resource_version: "5".into(),
                }
            } else {
                Observed::Absent {
                    cache_resource_version: None,
                }
            }
        });
        assert_eq!(pending, vec![Expected::Created("p2".into())]);
        assert!(
            e.pending("u", t(2), |_| Observed::Present {
                resource_version: "6".into()
            })
            .is_empty()
        );
        assert!(
            e.pending("other", t(2), |_| Observed::Absent {
                cache_resource_version: None
            })
            .is_empty()
        );
    }

    #[test]
    fn deletions_are_satisfied_by_absence_or_termination() {
        let e = Expectations::new(DEFAULT_TIMEOUT);
        e.expect("u", Expected::Deleted("p1".into()), t(0));
        assert_eq!(
            e.pending("u", t(1), |_| Observed::Present {
                resource_version: "1".into()
            })
            .len(),
            1
        );
        assert!(
            e.pending("u", t(1), |_| Observed::Terminating {
                resource_version: "2".into()
            })
            .is_empty()
        );
    }

    #[test]
    fn updates_need_a_newer_resource_version() {
        let e = Expectations::new(DEFAULT_TIMEOUT);
        e.expect(
            "u",
            Expected::Updated {
                name: "p".into(),
                resource_version: "100".into(),
            },
            t(0),
        );
        assert_eq!(
            e.pending("u", t(1), |_| Observed::Present {
                resource_version: "99".into()
            })
            .len(),
            1
        );
        assert!(
            e.pending("u", t(1), |_| Observed::Present {
                resource_version: "101".into()
            })
            .is_empty()
        );
    }

    #[test]
    fn expectations_time_out() {
        let e = Expectations::new(Duration::from_secs(10));
        e.expect("u", Expected::Created("p".into()), t(0));
        assert_eq!(
            e.pending("u", t(5), |_| Observed::Absent {
                cache_resource_version: None
            })
            .len(),
            1
        );
        assert!(
            e.pending("u", t(11), |_| Observed::Absent {
                cache_resource_version: None
            })
            .is_empty()
        );
    }

    /// A Pod deleted by someone else right after we created it never shows in the cache;
    /// once the cache has read past its creation, the owner is not held any longer.
    #[test]
    fn a_creation_deleted_before_it_was_seen_stops_blocking_once_the_cache_moves_on() {
        let e = Expectations::new(DEFAULT_TIMEOUT);
        let created = Expected::CreatedAt {
            name: "p".into(),
            resource_version: "100".into(),
        };
        e.expect("u", created.clone(), t(0));
        let absent = |at: Option<&str>| Observed::Absent {
            cache_resource_version: at.map(String::from),
        };
        assert_eq!(
            e.pending("u", t(1), |_| absent(None)),
            vec![created.clone()]
        );
        assert_eq!(
            e.pending("u", t(1), |_| absent(Some("99"))),
            vec![created.clone()],
            "the cache has not read the creation yet"
        );
        assert!(e.pending("u", t(1), |_| absent(Some("101"))).is_empty());
        e.expect("u", created, t(2));
        assert!(
            e.pending("u", t(3), |_| Observed::Present {
                resource_version: "100".into()
            })
            .is_empty()
        );
    }
}
