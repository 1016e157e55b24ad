//! Leftovers: containers, networks and volumes elengtis created and did not remove (a
//! crashed or killed runner). Only objects carrying [`super::LABEL_MANAGED`] are ever
//! touched, optionally narrowed to one run.

use std::collections::HashMap;

use super::api::{self as docker, CALL_DEADLINE, DockerEngine};
use super::{LABEL_MANAGED, LABEL_RUN};
use crate::sandbox::{SandboxError, SweepReport as GcReport};
use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveVolumeOptions,
};

fn filters(run: Option<&str>) -> HashMap<String, Vec<String>> {
    let mut labels = vec![format!("{LABEL_MANAGED}=true")];
    if let Some(run) = run {
        labels.push(format!("{LABEL_RUN}={run}"));
    }
    HashMap::from([("label".to_owned(), labels)])
}

/// Remove everything elengtis left behind (of one run, if given).
pub async fn sweep(engine: &DockerEngine, run: Option<&str>) -> Result<GcReport, SandboxError> {
    let docker = &engine.docker;
    let filters = filters(run);
    let mut report = GcReport::default();
    let containers = docker::call(
        "list leftover containers",
        CALL_DEADLINE,
        docker.list_containers(Some(ListContainersOptionsBuilder::default().all(true).filters(&filters).build())),
    )
    .await?;
    for c in containers {
        let Some(id) = c.id else { continue };
        let name = c.names.and_then(|n| n.first().cloned()).unwrap_or_else(|| id.clone());
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        match docker::call("remove a leftover container", CALL_DEADLINE, docker.remove_container(&id, Some(options)))
            .await
        {
            Ok(()) => report.containers.push(name.trim_start_matches('/').to_owned()),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    let networks = docker::call(
        "list leftover networks",
        CALL_DEADLINE,
        docker.list_networks(Some(ListNetworksOptionsBuilder::default().filters(&filters).build())),
    )
    .await?;
    for n in networks {
        let Some(id) = n.id else { continue };
        match docker::call("remove a leftover network", CALL_DEADLINE, docker.remove_network(&id)).await {
            Ok(()) => report.networks.push(n.name.unwrap_or(id)),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    let volumes = docker::call(
        "list leftover volumes",
        CALL_DEADLINE,
        docker.list_volumes(Some(ListVolumesOptionsBuilder::default().filters(&filters).build())),
    )
    .await?;
    for v in volumes.volumes.unwrap_or_default() {
        match docker::call(
            "remove a leftover volume",
            CALL_DEADLINE,
            docker.remove_volume(&v.name, None::<RemoveVolumeOptions>),
        )
        .await
        {
            Ok(()) => report.volumes.push(v.name),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    Ok(report)
}
