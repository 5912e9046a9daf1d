//! Deleting a test's cluster-scoped objects when their guards drop.

use std::fmt::Debug;
use std::marker::PhantomData;

use kube::api::DeleteParams;
use kube::core::ClusterResourceScope;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// Deletes the cluster-scoped object `name` of kind `K` (background propagation; already gone
/// counts as done) from a separate thread and runtime: a guard's `Drop` may run while the test's
/// own runtime is being dropped or unwinding from a panic, so that runtime cannot be used.
/// Failures are printed, never raised: a drop must not panic.
pub fn delete_on_drop<K>(config: &kube::Config, name: &str)
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let kind = K::kind(&()).to_lowercase();
    let owned_name = name.to_string();
    let config = config.clone();
    let deleted = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let client = Client::try_from(config)?;
            match Api::<K>::all(client)
                .delete(&owned_name, &DeleteParams::background())
                .await
            {
                // The test deleted it itself.
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(e) => Err(e.into()),
                Ok(_) => anyhow::Ok(()),
            }
        })
    })
    .join();
    match deleted {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("deleting test {kind} {name}: {e:#}"),
        Err(_) => eprintln!("deleting test {kind} {name}: the deleting thread panicked"),
    }
}

/// A guard for a cluster-scoped object of kind `K` a test made: dropping it deletes the object
/// with [`delete_on_drop`] (also when the test panics). Guards drop in reverse declaration order,
/// so one declared before a test's namespace outlives that namespace.
pub struct DeleteOnDrop<K>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    config: kube::Config,
    name: String,
    kind: PhantomData<K>,
}

impl<K> DeleteOnDrop<K>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    /// Guards the object `name`, deleting it as `config`'s user.
    pub fn new(config: &kube::Config, name: impl Into<String>) -> Self {
        DeleteOnDrop {
            config: config.clone(),
            name: name.into(),
            kind: PhantomData,
        }
    }
}

impl<K> Drop for DeleteOnDrop<K>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    fn drop(&mut self) {
        delete_on_drop::<K>(&self.config, &self.name);
    }
}
