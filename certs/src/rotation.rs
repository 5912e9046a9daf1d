//! When to mint, stage, promote and retire certificates: pure decisions over the material kept in
//! the Secret and the current time.
//!
//! A rotation of the CA never lets the API server meet a serving certificate it does not trust:
//!
//! 1. **stage**: a new CA is minted and added to the CA bundle next to the signing CA; the
//!    serving certificate stays the old one;
//! 2. **promote**, `propagation_delay` later (time for every injected `caBundle` to carry the new
//!    CA): the new CA becomes the signing CA and a new serving certificate signed by it is
//!    served; the old CA stays in the bundle as the *previous* CA;
//! 3. **drop**, `overlap` later (time for every replica to serve the new certificate): the
//!    previous CA leaves the bundle.
//!
//! The serving certificate is renewed on its own, by the signing CA, when two thirds of its
//! lifetime have passed, when it is missing or unusable, or when the wanted SANs change.

use time::{Duration, OffsetDateTime};

use crate::pki::{self, PemPair, PkiError, Validity};

/// Lifetimes and waiting times of the self-managed certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationPolicy {
    /// Lifetime of a new CA. It is rotated after two thirds of it.
    pub ca_lifetime: Duration,
    /// Lifetime of a new serving certificate (clipped to its CA's). Renewed after two thirds.
    pub leaf_lifetime: Duration,
    /// How long a staged CA sits in the bundle before certificates signed by it are served.
    pub propagation_delay: Duration,
    /// How long the previous CA stays in the bundle after the new one was promoted.
    pub overlap: Duration,
}

impl Default for RotationPolicy {
    /// CA one year, serving certificate 90 days, 1 minute propagation, 10 minutes overlap.
    fn default() -> Self {
        RotationPolicy {
            ca_lifetime: Duration::days(365),
            leaf_lifetime: Duration::days(90),
            propagation_delay: Duration::minutes(1),
            overlap: Duration::minutes(10),
        }
    }
}

/// The certificate material of the self-managed mode, as stored in the Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertState {
    /// The CA that signs serving certificates.
    pub signing: Option<PemPair>,
    /// A staged CA: trusted (in the bundle) but not signing yet.
    pub next: Option<PemPair>,
    /// The CA that signed before the last promotion, still trusted during the overlap.
    pub previous: Option<String>,
    /// The serving certificate and its key.
    pub leaf: Option<PemPair>,
    /// When `next` was staged.
    pub staged_at: Option<OffsetDateTime>,
    /// When the signing CA was promoted (and `previous` retired from signing).
    pub promoted_at: Option<OffsetDateTime>,
    /// Someone asked for a CA rotation now.
    pub rotation_requested: bool,
}

/// One write to the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No usable signing CA: start over with a new CA and serving certificate.
    CreateCa,
    /// Mint a new CA and add it to the bundle.
    StageNextCa,
    /// Sign with the staged CA, serve a certificate signed by it, keep the old CA trusted.
    PromoteNextCa,
    /// Stop trusting the previous CA.
    DropPreviousCa,
    /// Mint a new serving certificate with the signing CA.
    RenewLeaf,
}

/// What to do with the Secret now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write the result of this step.
    Write(Step),
    /// Nothing is due before `until`.
    Wait {
        /// When the next step falls due.
        until: OffsetDateTime,
    },
}

/// The serving certificate wanted: its SANs, the first of which is the name the API server
/// dials (`<svc>.<ns>.svc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafSpec {
    /// Subject alternative names; IP addresses in text form become IP SANs.
    pub sans: Vec<String>,
}

impl LeafSpec {
    /// The name a client verifies the certificate against.
    pub fn server_name(&self) -> &str {
        self.sans.first().map_or("", String::as_str)
    }
}

/// Decides the next step for `state` at `now`.
pub fn decide(
    state: &CertState,
    leaf_spec: &LeafSpec,
    policy: &RotationPolicy,
    now: OffsetDateTime,
) -> Decision {
    let Some(signing) = usable_ca(state.signing.as_ref(), now) else {
        return Decision::Write(Step::CreateCa);
    };
    let leaf = usable_leaf(state, &signing, leaf_spec, now);
    let Some(leaf) = leaf else {
        return Decision::Write(Step::RenewLeaf);
    };
    let mut due = Vec::new();

    if let Some(previous) = &state.previous {
        let expired = pki::parse_certificate("previous CA", previous)
            .map_or(true, |facts| facts.validity.not_after <= now);
        match state.promoted_at {
            Some(promoted) if !expired => {
                due.push((promoted + policy.overlap, Step::DropPreviousCa))
            }
            _ => return Decision::Write(Step::DropPreviousCa),
        }
    }
    match (&state.next, state.staged_at) {
        (Some(next), Some(staged)) if usable_ca(Some(next), now).is_some() => {
            due.push((staged + policy.propagation_delay, Step::PromoteNextCa));
        }
        (Some(_), _) => return Decision::Write(Step::StageNextCa),
        (None, _) if state.previous.is_none() => {
            let at = if state.rotation_requested {
                now
            } else {
                signing.validity.renew_at()
            };
            due.push((at, Step::StageNextCa));
        }
        (None, _) => {}
    }
    due.push((leaf.validity.renew_at(), Step::RenewLeaf));

    let (at, step) = due
        .into_iter()
        .min_by_key(|(at, _)| *at)
        .expect("the leaf renewal is always scheduled");
    if at <= now {
        Decision::Write(step)
    } else {
        Decision::Wait { until: at }
    }
}

/// The PEM CA bundle to trust: previous, signing and staged CA, oldest first (so the bundle
/// text does not change when a staged CA is promoted).
pub fn ca_bundle(state: &CertState) -> String {
    let mut bundle = String::new();
    let cas = [
        state.previous.as_deref(),
        state.signing.as_ref().map(|ca| ca.cert_pem.as_str()),
        state.next.as_ref().map(|ca| ca.cert_pem.as_str()),
    ];
    for pem in cas.into_iter().flatten() {
        bundle.push_str(pem.trim_end());
        bundle.push('\n');
    }
    bundle
}

/// The state after `step`, minting what the step needs. `ca_name` is the common name of a new CA.
pub fn apply(
    step: Step,
    state: &CertState,
    leaf_spec: &LeafSpec,
    policy: &RotationPolicy,
    ca_name: &str,
    now: OffsetDateTime,
) -> Result<CertState, PkiError> {
    let new_ca = || pki::mint_ca(ca_name, Validity::starting(now, policy.ca_lifetime));
    let new_leaf = |ca: &PemPair| {
        pki::mint_leaf(
            ca,
            &leaf_spec.sans,
            Validity::starting(now, policy.leaf_lifetime),
        )
    };
    let mut next = state.clone();
    match step {
        Step::CreateCa => {
            let ca = new_ca()?;
            next = CertState {
                leaf: Some(new_leaf(&ca)?),
                signing: Some(ca),
                ..CertState::default()
            };
        }
        Step::StageNextCa => {
            next.next = Some(new_ca()?);
            next.staged_at = Some(now);
            next.rotation_requested = false;
        }
        Step::PromoteNextCa => {
            let staged = state.next.clone().ok_or_else(|| PkiError::Key {
                what: "next CA".into(),
                reason: "no staged CA to promote".into(),
            })?;
            next.leaf = Some(new_leaf(&staged)?);
            next.previous = state.signing.as_ref().map(|ca| ca.cert_pem.clone());
            next.signing = Some(staged);
            next.next = None;
            next.staged_at = None;
            next.promoted_at = Some(now);
        }
        Step::DropPreviousCa => {
            next.previous = None;
            next.promoted_at = None;
        }
        Step::RenewLeaf => {
            let signing = state.signing.as_ref().ok_or_else(|| PkiError::Key {
                what: "signing CA".into(),
                reason: "no CA to sign the serving certificate".into(),
            })?;
            next.leaf = Some(new_leaf(signing)?);
        }
    }
    Ok(next)
}

/// Facts about a CA whose certificate parses, whose key matches and which is valid now.
fn usable_ca(ca: Option<&PemPair>, now: OffsetDateTime) -> Option<pki::CertificateFacts> {
    let ca = ca?;
    let facts = pki::parse_certificate("CA", &ca.cert_pem).ok()?;
    (facts.validity.contains(now) && pki::key_matches(&ca.cert_pem, &ca.key_pem)).then_some(facts)
}

/// Facts about the serving certificate if it can be served as is: its key matches, it carries
/// exactly the wanted SANs and it verifies under the signing CA now.
fn usable_leaf(
    state: &CertState,
    signing: &pki::CertificateFacts,
    leaf_spec: &LeafSpec,
    now: OffsetDateTime,
) -> Option<pki::CertificateFacts> {
    let leaf = state.leaf.as_ref()?;
    let facts = pki::parse_certificate("serving certificate", &leaf.cert_pem).ok()?;
    let wanted: std::collections::BTreeSet<String> = leaf_spec
        .sans
        .iter()
        .map(|san| {
            san.parse::<std::net::IpAddr>()
                .map_or_else(|_| san.clone(), |ip| ip.to_string())
        })
        .collect();
    let usable = facts.sans == wanted
        && pki::key_matches(&leaf.cert_pem, &leaf.key_pem)
        && pki::verifies_under(&facts.der, &signing.der, leaf_spec.server_name(), now);
    usable.then_some(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn spec() -> LeafSpec {
        LeafSpec {
            sans: vec![
                "raygate-webhook.raygate-system.svc".into(),
                "raygate-webhook.raygate-system".into(),
                "raygate-webhook".into(),
                "127.0.0.1".into(),
            ],
        }
    }

    fn policy() -> RotationPolicy {
        RotationPolicy {
            ca_lifetime: Duration::days(300),
            leaf_lifetime: Duration::days(90),
            propagation_delay: Duration::seconds(30),
            overlap: Duration::minutes(5),
        }
    }

    fn run(step: Step, state: &CertState, now: OffsetDateTime) -> CertState {
        apply(step, state, &spec(), &policy(), "raygate-ca", now).unwrap()
    }

    /// A fresh state made by `CreateCa` at `t0`.
    fn fresh() -> CertState {
        let state = CertState::default();
        assert_eq!(
            decide(&state, &spec(), &policy(), t0()),
            Decision::Write(Step::CreateCa)
        );
        run(Step::CreateCa, &state, t0())
    }

    fn der(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
        pki::parse_certificate("test", pem).unwrap().der
    }

    fn leaf_verifies_under(state: &CertState, ca_pem: &str, now: OffsetDateTime) -> bool {
        let leaf = der(&state.leaf.as_ref().unwrap().cert_pem);
        pki::verifies_under(&leaf, &der(ca_pem), spec().server_name(), now)
    }

    fn bundle_cas(state: &CertState) -> Vec<String> {
        ca_bundle(state)
            .split_inclusive("-----END CERTIFICATE-----\n")
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_fresh_state_waits_for_the_leaf_renewal_point() {
        let state = fresh();
        let signing = state.signing.clone().unwrap();
        assert!(leaf_verifies_under(&state, &signing.cert_pem, t0()));
        assert_eq!(bundle_cas(&state), vec![signing.cert_pem.clone()]);
        // Leaf lifetime 90 days + 5 min backdating: renew at two thirds of it.
        let leaf = pki::parse_certificate("leaf", &state.leaf.as_ref().unwrap().cert_pem).unwrap();
        assert_eq!(
            decide(&state, &spec(), &policy(), t0()),
            Decision::Wait {
                until: leaf.validity.renew_at()
            }
        );
        assert_eq!(
            decide(&state, &spec(), &policy(), leaf.validity.renew_at()),
            Decision::Write(Step::RenewLeaf)
        );
    }

    #[test]
    fn renewing_the_leaf_keeps_the_ca() {
        let state = fresh();
        let later = t0() + Duration::days(61);
        let renewed = run(Step::RenewLeaf, &state, later);
        assert_eq!(renewed.signing, state.signing);
        assert_ne!(renewed.leaf, state.leaf);
        assert_eq!(ca_bundle(&renewed), ca_bundle(&state));
        assert!(leaf_verifies_under(
            &renewed,
            &state.signing.unwrap().cert_pem,
            later
        ));
        assert!(matches!(
            decide(&renewed, &spec(), &policy(), later),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn a_full_ca_rotation_never_serves_an_untrusted_certificate() {
        let mut state = fresh();
        let old_ca = state.signing.clone().unwrap().cert_pem;
        let mut now = t0();
        // Keep the leaf fresh so only the CA's schedule matters.
        let ca_renew_at = pki::parse_certificate("ca", &old_ca)
            .unwrap()
            .validity
            .renew_at();
        while now < ca_renew_at {
            match decide(&state, &spec(), &policy(), now) {
                Decision::Write(Step::RenewLeaf) => state = run(Step::RenewLeaf, &state, now),
                Decision::Write(other) => panic!("unexpected {other:?} at {now}"),
                Decision::Wait { until } => now = until.min(ca_renew_at),
            }
        }
        assert_eq!(
            decide(&state, &spec(), &policy(), now),
            Decision::Write(Step::StageNextCa)
        );
        state = run(Step::StageNextCa, &state, now);
        let new_ca = state.next.clone().unwrap().cert_pem;
        // Staged: both trusted, the served leaf still from the old CA.
        assert_eq!(bundle_cas(&state), vec![old_ca.clone(), new_ca.clone()]);
        assert!(leaf_verifies_under(&state, &old_ca, now));
        assert_eq!(
            decide(&state, &spec(), &policy(), now),
            Decision::Wait {
                until: now + policy().propagation_delay
            }
        );
        now += policy().propagation_delay;
        assert_eq!(
            decide(&state, &spec(), &policy(), now),
            Decision::Write(Step::PromoteNextCa)
        );
        state = run(Step::PromoteNextCa, &state, now);
        // Promoted: the leaf is the new CA's, both still trusted, the bundle text unchanged.
        assert_eq!(state.signing.as_ref().unwrap().cert_pem, new_ca);
        assert!(leaf_verifies_under(&state, &new_ca, now));
        assert!(!leaf_verifies_under(&state, &old_ca, now));
        assert_eq!(bundle_cas(&state), vec![old_ca.clone(), new_ca.clone()]);
        assert_eq!(
            decide(&state, &spec(), &policy(), now),
            Decision::Wait {
                until: now + policy().overlap
            }
        );
        now += policy().overlap;
        assert_eq!(
            decide(&state, &spec(), &policy(), now),
            Decision::Write(Step::DropPreviousCa)
        );
        state = run(Step::DropPreviousCa, &state, now);
        assert_eq!(bundle_cas(&state), vec![new_ca.clone()]);
        assert!(matches!(
            decide(&state, &spec(), &policy(), now),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn a_requested_rotation_is_staged_at_once_but_not_during_an_overlap() {
        let mut state = fresh();
        state.rotation_requested = true;
        assert_eq!(
            decide(&state, &spec(), &policy(), t0()),
            Decision::Write(Step::StageNextCa)
        );
        let staged = run(Step::StageNextCa, &state, t0());
        assert!(!staged.rotation_requested);

        let mut overlapping = run(Step::PromoteNextCa, &staged, t0());
        overlapping.rotation_requested = true;
        assert_eq!(
            decide(&overlapping, &spec(), &policy(), t0()),
            Decision::Wait {
                until: t0() + policy().overlap
            }
        );
        let dropped = run(Step::DropPreviousCa, &overlapping, t0() + policy().overlap);
        assert!(dropped.rotation_requested);
        assert_eq!(
            decide(&dropped, &spec(), &policy(), t0() + policy().overlap),
            Decision::Write(Step::StageNextCa)
        );
    }

    #[test]
    fn a_staged_ca_without_a_staging_time_is_staged_again() {
        let mut state = run(Step::StageNextCa, &fresh(), t0());
        state.staged_at = None;
        assert_eq!(
            decide(&state, &spec(), &policy(), t0() + Duration::days(1)),
            Decision::Write(Step::StageNextCa)
        );
    }

    #[test]
    fn a_previous_ca_without_a_promotion_time_is_dropped() {
        let mut state = run(
            Step::PromoteNextCa,
            &run(Step::StageNextCa, &fresh(), t0()),
            t0(),
        );
        state.promoted_at = None;
        assert_eq!(
            decide(&state, &spec(), &policy(), t0()),
            Decision::Write(Step::DropPreviousCa)
        );
    }

    #[test]
    fn an_expired_or_broken_signing_ca_starts_over() {
        let state = fresh();
        assert_eq!(
            decide(&state, &spec(), &policy(), t0() + Duration::days(301)),
            Decision::Write(Step::CreateCa)
        );
        let mut mismatched = state.clone();
        mismatched.signing.as_mut().unwrap().key_pem = state.leaf.clone().unwrap().key_pem;
        assert_eq!(
            decide(&mismatched, &spec(), &policy(), t0()),
            Decision::Write(Step::CreateCa)
        );
    }

    #[test]
    fn a_leaf_for_other_names_or_from_another_ca_is_renewed() {
        let state = fresh();
        let mut more_sans = spec();
        more_sans.sans.push("extra.example".into());
        assert_eq!(
            decide(&state, &more_sans, &policy(), t0()),
            Decision::Write(Step::RenewLeaf)
        );
        let foreign = run(Step::CreateCa, &CertState::default(), t0());
        let mut mixed = state.clone();
        mixed.leaf = foreign.leaf;
        assert_eq!(
            decide(&mixed, &spec(), &policy(), t0()),
            Decision::Write(Step::RenewLeaf)
        );
        let mut missing = state;
        missing.leaf = None;
        assert_eq!(
            decide(&missing, &spec(), &policy(), t0()),
            Decision::Write(Step::RenewLeaf)
        );
    }

    #[test]
    fn ip_sans_compare_in_canonical_form() {
        let mut spec = spec();
        spec.sans.push("::0001".into());
        let state = apply(
            Step::CreateCa,
            &CertState::default(),
            &spec,
            &policy(),
            "ca",
            t0(),
        )
        .unwrap();
        assert!(matches!(
            decide(&state, &spec, &policy(), t0()),
            Decision::Wait { .. }
        ));
    }
}
