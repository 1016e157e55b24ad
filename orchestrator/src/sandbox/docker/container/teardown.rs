//! Teardown of a trial's sandbox: every container (target, relay, sink, egress proxy) removed
//! with its anonymous volumes, then the networks (the sink's own, behind a proxy, and the
//! trial's), each step bounded in time; the final state of each container recorded. A sandbox dropped without teardown is removed in the background.

use std::time::Duration;

use bollard::query_parameters::RemoveContainerOptionsBuilder;
use serde_json::{Value, json};

use super::super::api::{self as docker, CALL_DEADLINE};
use super::TrialContainer;

impl TrialContainer {
    /// Remove the containers (and their anonymous volumes) and the network, each bounded in
    /// time; record the final state. Returns the lifecycle record and the errors.
    pub async fn teardown(mut self) -> (Value, Vec<String>) {
        let mut errors = Vec::new();
        self.stamp("teardown_started");
        if let Some(task) = self.relay_task.take() {
            task.abort();
        }
        if let Some(stats) = self.relay_stats.take() {
            let stats = stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            if let Some(Value::Object(r)) = self.record.get_mut("relay") {
                r.insert("stream".into(), serde_json::to_value(&stats).unwrap_or(Value::Null));
            }
        }
        // The containers go in parallel (a relay or sink next to the target): each is
        // inspected for its final state, then force-removed with its anonymous volumes.
        let containers = std::mem::take(&mut self.containers);
        let this = &self;
        let ended = futures_util::future::join_all(containers.iter().map(|(id, role)| async move {
            let state = this.inspect(id).await.map(|state| {
                let s = &state["State"];
                json!({"status": s["Status"], "exit_code": s["ExitCode"], "oom_killed": s["OOMKilled"], "end": end_state(s), "started_at": s["StartedAt"], "finished_at": s["FinishedAt"]})
            });
            let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
            let removed = docker::call(
                &format!("remove the {role} container"),
                CALL_DEADLINE,
                this.docker.remove_container(id, Some(options)),
            )
            .await;
            (*role, state, removed)
        }))
        .await;
        for (role, state, removed) in ended {
            match state {
                Ok(state) if role == "target" => {
                    self.record.insert("state".into(), state);
                }
                Ok(state) => {
                    if let Some(Value::Object(r)) = self.record.get_mut(role) {
                        r.insert("state".into(), state);
                    }
                }
                Err(e) => errors.push(e.to_string()),
            }
            match removed {
                Ok(()) if role == "target" => self.stamp("container_removed"),
                Ok(()) => {}
                Err(e) => errors.push(e.to_string()),
            }
        }
        // The sink's own network (behind an egress proxy) goes first; then the trial network.
        for (id, what, stamp) in [
            (self.sink_network_id.take(), "remove the sink's network", "sink_network_removed"),
            (self.network_id.take(), "remove the trial network", "network_removed"),
        ] {
            let Some(id) = id else { continue };
            if remove_network(&self.docker, &id, what, &mut errors).await {
                self.stamp(stamp);
            }
        }
        self.record.insert("cleanup".into(), json!({"ok": errors.is_empty(), "errors": errors}));
        (Value::Object(std::mem::take(&mut self.record)), errors)
    }
}

impl Drop for TrialContainer {
    /// A sandbox dropped without teardown (a panic, an aborted future) is removed in the
    /// background; `elengtis gc` finds anything that survives even that.
    fn drop(&mut self) {
        let containers = std::mem::take(&mut self.containers);
        let networks: Vec<String> = self.sink_network_id.take().into_iter().chain(self.network_id.take()).collect();
        if containers.is_empty() && networks.is_empty() {
            return;
        }
        let docker = self.docker.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for (id, _) in containers {
                    let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
                    let _ = tokio::time::timeout(CALL_DEADLINE, docker.remove_container(&id, Some(options))).await;
                }
                for id in networks {
                    let _ = tokio::time::timeout(CALL_DEADLINE, docker.remove_network(&id)).await;
                }
            });
        }
    }
}

/// How a container had ended when the runner looked at it before removing it (`State` of
/// the engine's inspect answer): `oom_killed` (the kernel's OOM killer ended it: the memory
/// limit held), `killed` (SIGKILL otherwise, exit 137), `exited` (it ended by itself),
/// `running` (still running: the runner ended it), or `unknown`.
pub fn end_state(state: &Value) -> &'static str {
    if state["OOMKilled"] == true {
        "oom_killed"
    } else if state["Running"] == true {
        "running"
    } else if state["Status"] == "exited" || state["Status"] == "dead" {
        if state["ExitCode"] == 137 { "killed" } else { "exited" }
    } else {
        "unknown"
    }
}

/// Remove a network, three tries 200 ms apart (an engine may still be detaching the last
/// endpoint); the last failure goes into `errors`. Whether it was removed.
async fn remove_network(docker: &bollard::Docker, id: &str, what: &'static str, errors: &mut Vec<String>) -> bool {
    for attempt in 0..3 {
        match docker::call(what, CALL_DEADLINE, docker.remove_network(id)).await {
            Ok(()) => return true,
            Err(e) if attempt == 2 => errors.push(e.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

#[cfg(test)]
mod end_state_tests {
    use serde_json::json;

    use super::end_state;

    #[test]
    fn the_end_state_names_how_the_container_ended() {
        let oom = json!({"Status": "exited", "Running": false, "OOMKilled": true, "ExitCode": 137});
        assert_eq!(end_state(&oom), "oom_killed");
        let killed = json!({"Status": "exited", "Running": false, "OOMKilled": false, "ExitCode": 137});
        assert_eq!(end_state(&killed), "killed");
        let exited = json!({"Status": "exited", "Running": false, "OOMKilled": false, "ExitCode": 3});
        assert_eq!(end_state(&exited), "exited");
        let running = json!({"Status": "running", "Running": true, "OOMKilled": false, "ExitCode": 0});
        assert_eq!(end_state(&running), "running");
        assert_eq!(end_state(&json!({})), "unknown");
    }
}
