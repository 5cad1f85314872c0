//! Certificates we generate: the CA that signs now, earlier CAs still trusted, and the
//! serving certificate, as one value. A rotation computes the next value without touching
//! the current one, so the process adopts it only once it is decided: at once when the CA
//! lives in this process, or once it is written to the CA Secret (see [`super::secret`]),
//! where another replica may have rotated first.

use std::sync::Arc;
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;

use super::certs::{Authority, Rotation, Serving};
use crate::Error;

#[derive(Clone)]
pub(crate) struct Generated {
    pub(crate) ca: Arc<Authority>,
    /// Earlier CAs, newest first, kept in the caBundle until they expire so a certificate
    /// they signed keeps verifying; the newest also signs serving certificates until the
    /// current CA has reached the apiservers.
    pub(crate) previous: Vec<Arc<Authority>>,
    pub(crate) serving: Serving,
}

impl Generated {
    /// A new CA (generation 1) and a serving certificate for `sans`.
    pub(crate) fn new(
        name: &str,
        rotation: &Rotation,
        sans: &[String],
        provider: &CryptoProvider,
        now: SystemTime,
    ) -> Result<Self, Error> {
        let ca = Authority::generate(name, rotation, 1, now)?;
        let serving = ca.issue(sans, rotation, provider, now)?;
        Ok(Generated {
            ca: Arc::new(ca),
            previous: Vec::new(),
            serving,
        })
    }

    /// The caBundle: every trusted CA, newest first.
    pub(crate) fn bundle(&self) -> String {
        std::iter::once(self.ca.pem.as_str())
            .chain(self.previous.iter().map(|p| p.pem.as_str()))
            .collect()
    }

    /// A new CA once the current one is due. It joins the bundle in front of the old one;
    /// the serving certificate stays (signed by the old CA) until the new bundle has
    /// reached the apiservers ([`Generated::rotate_serving`] with `propagated`).
    pub(crate) fn rotate_ca(
        &self,
        name: &str,
        rotation: &Rotation,
        now: SystemTime,
    ) -> Result<Option<Self>, Error> {
        if !rotation.due(self.ca.issued, self.ca.expires, now) {
            return Ok(None);
        }
        let next = Authority::generate(name, rotation, self.ca.generation + 1, now)?;
        let mut previous = vec![self.ca.clone()];
        previous.extend(self.previous.iter().cloned());
        previous.retain(|p| p.expires > now);
        Ok(Some(Generated {
            ca: Arc::new(next),
            previous,
            serving: self.serving.clone(),
        }))
    }

    /// A new serving certificate when the current one is due, when the CA changed and the
    /// new bundle has `propagated` (apiservers learn a caBundle through a watch, a moment
    /// after the apply: until then the newest previous CA, still valid and still in the
    /// bundle, signs), or when it lacks one of `sans` (a replica reached under other
    /// names loaded it from the CA Secret: the new one carries both replicas' names, so
    /// neither has to replace it again).
    pub(crate) fn rotate_serving(
        &self,
        rotation: &Rotation,
        sans: &[String],
        provider: &CryptoProvider,
        propagated: bool,
        now: SystemTime,
    ) -> Result<Option<Self>, Error> {
        let serving = &self.serving;
        let due = rotation.due(serving.issued, serving.expires, now);
        let follow_ca = propagated && serving.ca_generation != self.ca.generation;
        let missing = sans.iter().any(|s| !serving.sans.contains(s));
        if !(due || follow_ca || missing) {
            return Ok(None);
        }
        let signer = match self.previous.first() {
            Some(prev) if !propagated && prev.expires > now => prev,
            _ => &self.ca,
        };
        let mut names = sans.to_vec();
        if missing && !due {
            names.extend(serving.sans.iter().filter(|s| !sans.contains(s)).cloned());
        }
        let next = signer.issue(&names, rotation, provider, now)?;
        Ok(Some(Generated {
            serving: next,
            ..self.clone()
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::certs::provider;
    use super::*;

    fn sans() -> Vec<String> {
        vec!["127.0.0.1".into(), "localhost".into()]
    }

    fn short() -> Rotation {
        Rotation {
            ca_validity: Duration::from_secs(100),
            serving_validity: Duration::from_secs(80),
            rotate_at: 0.5,
            backdate: Duration::ZERO,
            ..Rotation::default()
        }
    }

    #[test]
    fn nothing_rotates_before_it_is_due() {
        let t0 = SystemTime::now();
        let g = Generated::new("t", &short(), &sans(), &provider(), t0).unwrap();
        let t = t0 + Duration::from_secs(4);
        assert!(g.rotate_ca("t", &short(), t).unwrap().is_none());
        assert!(
            g.rotate_serving(&short(), &sans(), &provider(), true, t)
                .unwrap()
                .is_none()
        );
        assert_eq!(g.bundle(), g.ca.pem);
    }

    #[test]
    fn a_new_ca_joins_the_bundle_and_signs_only_once_propagated() {
        let t0 = SystemTime::now();
        let g = Generated::new("t", &short(), &sans(), &provider(), t0).unwrap();
        let t1 = t0 + Duration::from_secs(50);
        let rotated = g.rotate_ca("t", &short(), t1).unwrap().expect("due");
        assert_eq!(rotated.ca.generation, 2);
        assert_eq!(rotated.bundle(), format!("{}{}", rotated.ca.pem, g.ca.pem));
        // The serving certificate is the old one, still from generation 1.
        assert_eq!(rotated.serving.der(), g.serving.der());
        // It is due (issued at t0 for 80s), but the new CA has not propagated: the
        // previous CA signs its successor.
        let renewed = rotated
            .rotate_serving(&short(), &sans(), &provider(), false, t1)
            .unwrap()
            .expect("due");
        assert_eq!(renewed.serving.ca_generation, 1);
        assert_ne!(renewed.serving.der(), g.serving.der());
        // Neither due nor propagated: nothing to do.
        let t2 = t1 + Duration::from_secs(1);
        assert!(
            renewed
                .rotate_serving(&short(), &sans(), &provider(), false, t2)
                .unwrap()
                .is_none()
        );
        // Propagated: the serving certificate follows the new CA.
        let followed = renewed
            .rotate_serving(&short(), &sans(), &provider(), true, t2)
            .unwrap()
            .expect("follows the CA");
        assert_eq!(followed.serving.ca_generation, 2);
        assert_eq!(followed.bundle(), rotated.bundle());
    }

    #[test]
    fn expired_cas_leave_the_bundle() {
        let t0 = SystemTime::now();
        let g = Generated::new("t", &short(), &sans(), &provider(), t0).unwrap();
        let r1 = g
            .rotate_ca("t", &short(), t0 + Duration::from_secs(50))
            .unwrap()
            .unwrap();
        let r2 = r1
            .rotate_ca("t", &short(), t0 + Duration::from_secs(101))
            .unwrap()
            .unwrap();
        // Generation 1 expired at t0+100; generation 2 is still valid.
        assert_eq!(r2.previous.len(), 1);
        assert_eq!(r2.previous[0].generation, 2);
        assert_eq!(r2.ca.generation, 3);
    }

    #[test]
    fn a_serving_certificate_without_our_names_is_reissued_for_both() {
        let t0 = SystemTime::now();
        let g = Generated::new("t", &short(), &sans(), &provider(), t0).unwrap();
        let ours = vec!["127.0.0.1".to_string(), "svc.kruise-system.svc".to_string()];
        let next = g
            .rotate_serving(&short(), &ours, &provider(), true, t0)
            .unwrap()
            .expect("a name is missing");
        for name in sans().iter().chain(&ours) {
            assert!(next.serving.sans.contains(name), "{:?}", next.serving.sans);
        }
        // Both replicas are now content with it.
        for names in [&sans(), &ours] {
            assert!(
                next.rotate_serving(&short(), names, &provider(), true, t0)
                    .unwrap()
                    .is_none()
            );
        }
    }
}
