//! Prometheus metrics of the serving certificate.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::rotation::Step;

/// Label set of the rotation-step counter.
type StepLabel = [(&'static str, &'static str); 1];

/// Metrics of the serving certificate, shared by the resolver and the source feeding it.
/// Clones share the same values.
#[derive(Clone, Debug, Default)]
pub struct CertMetrics {
    pub(crate) not_after_seconds: Gauge,
    pub(crate) loads: Counter,
    pub(crate) steps: Family<StepLabel, Counter>,
    pub(crate) errors: Counter,
}

impl CertMetrics {
    /// Registers, under `registry`'s prefix:
    /// * `raygate_certificate_not_after_seconds` — `notAfter` of the served certificate (Unix
    ///   seconds); alert when it comes close;
    /// * `raygate_certificate_loads_total` — serving certificates loaded into the TLS server;
    /// * `raygate_certificate_rotation_steps_total{step}` — Secret writes of the self-managed
    ///   mode by this replica (`create_ca`, `stage_next_ca`, `promote_next_ca`,
    ///   `drop_previous_ca`, `renew_leaf`);
    /// * `raygate_certificate_errors_total` — failed loads, Secret reads or writes, injections.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "raygate_certificate_not_after_seconds",
            "notAfter of the served webhook certificate, in Unix seconds",
            self.not_after_seconds.clone(),
        );
        registry.register(
            "raygate_certificate_loads",
            "Serving certificates loaded into the webhook's TLS server",
            self.loads.clone(),
        );
        registry.register(
            "raygate_certificate_rotation_steps",
            "Writes of the self-managed certificate Secret by this replica, by rotation step",
            self.steps.clone(),
        );
        registry.register(
            "raygate_certificate_errors",
            "Failed certificate loads, Secret reads or writes and CA bundle injections",
            self.errors.clone(),
        );
    }

    /// Counts a Secret write of `step`.
    pub(crate) fn step_written(&self, step: Step) {
        let name = match step {
            Step::CreateCa => "create_ca",
            Step::StageNextCa => "stage_next_ca",
            Step::PromoteNextCa => "promote_next_ca",
            Step::DropPreviousCa => "drop_previous_ca",
            Step::RenewLeaf => "renew_leaf",
        };
        self.steps.get_or_create(&[("step", name)]).inc();
    }

    /// `raygate_certificate_rotation_steps_total{step}` as counted so far.
    pub fn steps_written(&self, step: &'static str) -> u64 {
        self.steps.get_or_create(&[("step", step)]).get()
    }

    /// `raygate_certificate_loads_total` as counted so far.
    pub fn loads(&self) -> u64 {
        self.loads.get()
    }

    /// `raygate_certificate_not_after_seconds` now.
    pub fn not_after_seconds(&self) -> i64 {
        self.not_after_seconds.get()
    }
}
