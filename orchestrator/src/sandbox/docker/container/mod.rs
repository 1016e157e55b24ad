//! One trial's sandbox: a fresh internal network, a fresh hardened container from an
//! immutable image id, the engine's inspect answer checked against the contract, readiness,
//! and teardown with every step bounded in time and recorded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use bollard::models::{
    ContainerCreateBody, EndpointSettings, NetworkConnectRequest, NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions, InspectNetworkOptions,
    StartContainerOptions,
};
use serde_json::{Map, Value, json};
use tokio::io::AsyncWrite;

mod ready;
mod teardown;

use self::ready::container_addr;
pub use self::teardown::end_state;
use super::api::{self as docker, CALL_DEADLINE, DockerEngine, ResolvedImage};
use super::attach::{AttachedStdio, split_attached};
use super::hardening::{self, Expected, INHIBIT_IPV4};
use super::network::Layout;
use super::runtime::RuntimeFacts;
use super::{LABEL_ATTEMPT, LABEL_MANAGED, LABEL_RUN, LABEL_TRIAL};
use crate::crashpoint::CrashPoint;
use crate::sandbox::{
    EGRESS_PROXY_ALIAS, EgressProxySpec, Fetched, McpMode, ProxyChannel, SandboxError, SinkChannel, SnapshotFiles,
    TargetEndpoint, TrialSandbox,
};

/// The name of an attempt's network and target container (other containers add `-ROLE`):
/// the first 8 letters and digits of the run id and of the attempt id. Names are unique on
/// the engine as long as those are; every object also carries the run, trial and attempt
/// labels that `gc` selects by.
pub fn object_name(run_id: &str, attempt_id: &str) -> String {
    let short = |s: &str| s.chars().filter(char::is_ascii_alphanumeric).take(8).collect::<String>();
    format!("elengtis-{}-{}", short(run_id), short(attempt_id))
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// The image, resolved once per run.
    pub image: ResolvedImage,
    /// Non-root user id.
    pub uid: u64,
    /// Non-root group id.
    pub gid: u64,
    /// Command (image default when empty).
    pub command: Vec<String>,
    /// Environment (values never logged or written by elengtis).
    pub env: Vec<(String, String)>,
    /// Transport inside the container.
    pub mode: McpMode,
    /// Paths that get a fresh anonymous volume.
    pub volumes: Vec<String>,
    /// How long the server may take to answer.
    pub startup_timeout: Duration,
    /// Run id (label).
    pub run_id: String,
    /// Trial id (label).
    pub trial_id: String,
    /// Attempt id (label).
    pub attempt_id: String,
    /// Whether the runner routes to the trial network itself (streamable HTTP without a
    /// relay). Only then does the bridge get a host address; otherwise (stdio, relay) it has
    /// none and the container cannot reach any address of the host.
    pub host_route: bool,
    /// How the trial is networked: its own internal bridge; the engine's `none` network
    /// mode (loopback only, nothing to create or remove: a stdio server with no sink and no
    /// gateway needs nothing else); or the sink's namespace (the sink in the `none` mode, the
    /// target joining it: a stdio server whose only need is its sink).
    pub network: Layout,
    /// Bytes of a stdio server's stderr kept for the evidence.
    pub stderr_bytes: usize,
    /// The OCI runtime asked of the engine for every container of the trial (`None`: the
    /// engine's default).
    pub runtime: Option<String>,
    /// What is known of the runtime the containers run under (its name is asserted).
    pub runtime_facts: RuntimeFacts,
}

/// Where the MCP server can be reached.
#[derive(Debug)]
enum Endpoint {
    /// Connect to `addr`, addressing the server as `url` (host `localhost`).
    Http {
        /// URL with host `localhost`.
        url: String,
        /// The container's address on the trial network.
        addr: SocketAddr,
    },
    /// Speak over the attach streams.
    Stdio(AttachedStdio),
}

/// A running trial sandbox. Call [`TrialContainer::teardown`] on every path.
pub struct TrialContainer {
    docker: bollard::Docker,
    network_id: Option<String>,
    /// The sink's own network, behind an egress proxy (shared only by the sink and the proxy).
    sink_network_id: Option<String>,
    /// Containers of this trial (the target, and the canary sink when there is one).
    containers: Vec<(String, &'static str)>,
    /// The sink's stdin: dropping it ends the sink, so it lives until teardown.
    record: Map<String, Value>,
    started: Instant,
    labels: HashMap<String, String>,
    name: String,
    /// The loopback listener feeding the relay container, if one is used.
    relay_task: Option<tokio::task::JoinHandle<()>>,
    /// What the relay stream carried (recorded at teardown).
    relay_stats: Option<std::sync::Arc<std::sync::Mutex<super::relay::client::StreamStats>>>,
    /// Whether the bridge holds a host address ([`ContainerSpec::host_route`]).
    host_route: bool,
    /// Whether the trial runs without a network of its own ([`Layout::None`] or
    /// [`Layout::SinkNamespace`]): its first container starts in the `none` mode.
    networkless: bool,
    /// Whether the target joins the sink's namespace ([`Layout::SinkNamespace`]).
    sink_namespace: bool,
    /// The runtime asked for ([`ContainerSpec::runtime`]).
    runtime: Option<String>,
    /// The runtime every container must run under (asserted).
    runtime_name: String,
    /// What this trial starts, once prepared by the backend.
    plan: Option<Plan>,
}

/// What a trial's sandbox starts: its target (with the relay, if any) and its sink image.
#[derive(Debug, Clone)]
struct Plan {
    spec: ContainerSpec,
    relay: Option<ResolvedImage>,
    sink_image: Option<ResolvedImage>,
    egress_proxy: Option<EgressProxySpec>,
}

impl std::fmt::Debug for TrialContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrialContainer")
            .field("name", &self.name)
            .field("network_id", &self.network_id)
            .field("containers", &self.containers)
            .finish_non_exhaustive()
    }
}

/// A canary sink container, started on the trial network before the target.
pub struct StartedSink {
    /// Its stdout (JSON lines: ready, then one record per request).
    pub records: tokio::io::DuplexStream,
    /// Its stdin (barrier lines; dropping it ends the sink).
    pub control: Pin<Box<dyn AsyncWrite + Send>>,
    /// Its address on the trial network.
    pub addr: SocketAddr,
}

/// A trial container created (and, for stdio, attached) but not yet started.
struct Created {
    role: &'static str,
    id: String,
    name: String,
    warnings: Vec<String>,
    image: ResolvedImage,
    user: String,
    volumes: Vec<String>,
    /// Behind a lock only so that a `Created` can be shared while the trial's futures run
    /// on any thread; it is taken once.
    attached: std::sync::Mutex<Option<AttachedStdio>>,
}

impl Created {
    fn take_attached(&self) -> Option<AttachedStdio> {
        self.attached.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

impl std::fmt::Debug for StartedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedSink").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Port the canary sink listens on inside its container.
pub const SINK_PORT: u16 = 8080;
/// Port the canary sink listens on in its own namespace, which the target shares: an unusual
/// one, so that a server which listens on a common port of its own (8080 among them) still
/// starts beside it.
pub const SHARED_SINK_PORT: u16 = 48_080;
/// Port the egress proxy listens on: plain HTTP's, so a client that resolves an intercepted
/// host to the proxy reaches it at the URL's default port (Docker lets an unprivileged
/// process bind it inside the container's network namespace).
pub const PROXY_PORT: u16 = 80;

impl TrialContainer {
    fn stamp(&mut self, event: &str) {
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if let Value::Object(ts) = self.record.entry("timestamps").or_insert_with(|| json!({})) {
            ts.insert(event.to_owned(), json!(crate::results::now_rfc3339()));
        }
        if let Value::Object(d) = self.record.entry("elapsed_ms").or_insert_with(|| json!({})) {
            d.insert(event.to_owned(), json!((ms * 10.0).round() / 10.0));
        }
    }

    /// The target container's id.
    pub fn container_id(&self) -> Option<&str> {
        self.container_of("target")
    }

    /// The id of the trial's container in `role` (`target`, `sink`, …).
    fn container_of(&self, role: &str) -> Option<&str> {
        self.containers.iter().find(|(_, r)| *r == role).map(|(id, _)| id.as_str())
    }

    /// Record an error before teardown.
    pub fn note_error(&mut self, e: &SandboxError) {
        self.record.insert("error".into(), json!({"kind": e.kind(), "detail": e.to_string()}));
    }

    /// Create the trial's internal network. Nothing else exists yet.
    pub async fn new_network(
        engine: &DockerEngine,
        spec: &ContainerSpec,
    ) -> Result<TrialContainer, (SandboxError, Value)> {
        let name = object_name(&spec.run_id, &spec.attempt_id);
        let mut labels = HashMap::from([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_RUN.to_owned(), spec.run_id.clone()),
            (LABEL_TRIAL.to_owned(), spec.trial_id.clone()),
            (LABEL_ATTEMPT.to_owned(), spec.attempt_id.clone()),
        ]);
        // Who created it: `elengtis gc` removes it only once that process is provably gone.
        labels.extend(super::gc::RunnerIdentity::current().labels());
        let mut this = TrialContainer {
            docker: engine.docker.clone(),
            network_id: None,
            sink_network_id: None,
            containers: Vec::new(),
            record: Map::new(),
            started: Instant::now(),
            labels,
            name,
            relay_task: None,
            relay_stats: None,
            host_route: spec.host_route,
            networkless: spec.network != Layout::Bridge,
            sink_namespace: spec.network == Layout::SinkNamespace,
            runtime: spec.runtime.clone(),
            runtime_name: spec.runtime_facts.name.clone(),
            plan: None,
        };
        this.record.insert("isolation".into(), json!("isolated_container"));
        this.record.insert("mode".into(), json!(spec.mode.name()));
        this.record.insert("session".into(), json!("fresh_container"));
        this.record.insert("reset_asserted".into(), json!(true));
        this.record.insert("image".into(), serde_json::to_value(&spec.image).unwrap_or(Value::Null));
        this.record.insert("engine".into(), serde_json::to_value(&engine.facts).unwrap_or(Value::Null));
        this.record.insert("runtime".into(), serde_json::to_value(&spec.runtime_facts).unwrap_or(Value::Null));
        if this.networkless {
            // Loopback only: the engine's `none` mode. Nothing is created, so nothing can be
            // left behind; the hardening facts assert the mode the engine reports.
            this.record.insert("host_address_on_bridge".into(), json!(false));
            return Ok(this);
        }
        // Unless the runner must route to the network, the bridge gets no host address: the
        // container then cannot reach any address of the host (an internal network alone only
        // stops forwarding; the host's own addresses would still answer).
        let options = (!spec.host_route).then(|| HashMap::from([(INHIBIT_IPV4.to_owned(), "true".to_owned())]));
        this.record.insert("host_address_on_bridge".into(), json!(spec.host_route));
        let request = NetworkCreateRequest {
            name: this.name.clone(),
            driver: Some("bridge".into()),
            internal: Some(true),
            labels: Some(this.labels.clone()),
            options,
            ..NetworkCreateRequest::default()
        };
        match docker::call("create the trial network", CALL_DEADLINE, this.docker.create_network(request)).await {
            Ok(created) => {
                this.network_id = Some(created.id.clone());
                this.stamp("network_created");
                crate::crashpoint::reach(CrashPoint::NetworkCreate);
                Ok(this)
            }
            Err(e) => {
                this.note_error(&e);
                let (record, _) = this.teardown().await;
                Err((e, record))
            }
        }
    }

    async fn network(&self, id: &str) -> Result<Value, SandboxError> {
        let network = docker::call(
            "inspect the trial network",
            CALL_DEADLINE,
            self.docker.inspect_network(id, None::<InspectNetworkOptions>),
        )
        .await?;
        Ok(serde_json::to_value(&network).unwrap_or(Value::Null))
    }

    /// Create one container of the trial on its network (alias `role`), or on the network
    /// and with the aliases of `placement`, and, for `stdio`, attach to it. It is on the
    /// teardown list from the moment it exists.
    #[expect(clippy::too_many_arguments, reason = "one place that creates every trial container")]
    async fn create(
        &mut self,
        role: &'static str,
        image: &ResolvedImage,
        user: String,
        command: Vec<String>,
        env: Vec<(String, String)>,
        exposed: Option<u16>,
        volumes: &[String],
        stdio: bool,
        placement: Option<(String, Vec<String>)>,
    ) -> Result<Created, SandboxError> {
        let (network_id, aliases) = placement.unwrap_or_else(|| (self.primary_network(), vec![role.replace('_', "-")]));
        // The `none` mode and another container's namespace take no endpoint settings
        // (aliases exist only on user networks).
        let own_network = network_id != hardening::NO_NETWORK && !network_id.starts_with(hardening::SHARED_PREFIX);
        let endpoints = own_network.then(|| NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                network_id.clone(),
                EndpointSettings { aliases: Some(aliases), ..EndpointSettings::default() },
            )])),
        });
        let body = ContainerCreateBody {
            image: Some(image.id.clone()),
            user: Some(user.clone()),
            cmd: (!command.is_empty()).then_some(command),
            env: Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(self.labels.clone()),
            exposed_ports: exposed.map(|port| vec![format!("{port}/tcp")]),
            attach_stdin: Some(stdio),
            attach_stdout: Some(stdio),
            attach_stderr: Some(stdio),
            open_stdin: Some(stdio),
            stdin_once: Some(stdio),
            tty: Some(false),
            network_disabled: Some(false),
            host_config: Some(hardening::host_config(&network_id, volumes, &self.labels, self.runtime.as_deref())),
            networking_config: endpoints,
            ..ContainerCreateBody::default()
        };
        let name = if role == "target" { self.name.clone() } else { format!("{}-{role}", self.name) };
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = docker::call(
            &format!("create the {role} container"),
            CALL_DEADLINE,
            self.docker.create_container(Some(options), body),
        )
        .await?;
        self.containers.push((created.id.clone(), role));
        if role == "target" {
            self.stamp("container_created");
        }
        crate::crashpoint::reach(CrashPoint::ContainerCreate);
        let attached = if stdio {
            let options = AttachContainerOptionsBuilder::default()
                .stdin(true)
                .stdout(true)
                .stderr(true)
                .stream(true)
                .logs(false)
                .build();
            let results = docker::call(
                &format!("attach to the {role} container"),
                CALL_DEADLINE,
                self.docker.attach_container(&created.id, Some(options)),
            )
            .await?;
            Some(AttachedStdio { output: results.output, input: results.input })
        } else {
            None
        };
        Ok(Created {
            role,
            id: created.id,
            name,
            warnings: created.warnings,
            image: image.clone(),
            user,
            volumes: volumes.to_vec(),
            attached: std::sync::Mutex::new(attached),
        })
    }

    /// Start a created container; the engine's inspect answer after the start.
    async fn start_created(&self, created: &Created) -> Result<Value, SandboxError> {
        docker::call(
            &format!("start the {} container", created.role),
            CALL_DEADLINE,
            self.docker.start_container(&created.id, None::<StartContainerOptions>),
        )
        .await?;
        self.inspect(&created.id).await
    }

    /// Check a started container's hardening against the engine's answer and record it.
    async fn register(&mut self, created: &Created, inspect: &Value) -> Result<Vec<hardening::Fact>, SandboxError> {
        let network_id = self.primary_network();
        self.register_on(created, inspect, network_id, Vec::new()).await
    }

    /// The network a trial container starts on: the trial's own, or the engine's `none`.
    fn primary_network(&self) -> String {
        if self.networkless { hardening::NO_NETWORK.to_owned() } else { self.network_id.clone().unwrap_or_default() }
    }

    /// Refuse what needs the trial network when the trial runs without one.
    fn needs_network(&self, what: &str) -> Result<(), SandboxError> {
        if self.networkless && !self.sink_namespace {
            return Err(SandboxError::Unusable(format!(
                "failed to {what}: this trial runs without a network (a stdio target with no sink and no gateway)"
            )));
        }
        Ok(())
    }

    /// [`Self::register`] for a container whose primary network is `network_id` and which
    /// must also be attached to `also_attached` (and to nothing else).
    async fn register_on(
        &mut self,
        created: &Created,
        inspect: &Value,
        network_id: String,
        also_attached: Vec<String>,
    ) -> Result<Vec<hardening::Fact>, SandboxError> {
        // A container in another's network namespace has no network of its own to inspect.
        let network = if network_id.starts_with(hardening::SHARED_PREFIX) {
            Value::Null
        } else {
            self.network(&network_id).await?
        };
        let expected = Expected {
            image_id: created.image.id.clone(),
            user: created.user.clone(),
            network_id,
            also_attached,
            volumes: created.volumes.clone(),
            host_route: self.host_route,
            runtime: self.runtime_name.clone(),
        };
        let facts = hardening::check(inspect, &network, &expected);
        let record = json!({"id": created.id, "name": created.name, "warnings": created.warnings});
        if created.role == "target" {
            self.record.insert("container".into(), record);
            let described = if self.sink_namespace {
                let sink = self.container_of("sink");
                json!({"mode": Layout::SinkNamespace.mode(), "shared_with": {"role": "sink", "id": sink}, "scope": "trial"})
            } else if self.networkless {
                json!({"mode": Layout::None.mode(), "driver": network["Driver"], "scope": "trial"})
            } else {
                json!({"mode": Layout::Bridge.mode(), "id": self.network_id, "name": self.name, "internal": network["Internal"], "scope": "trial"})
            };
            self.record.insert("network".into(), described);
        } else {
            self.record
                .insert(created.role.into(), json!({"container": record, "image": created.image, "hardening": facts}));
        }
        Ok(facts)
    }

    /// Start the canary sink on the trial network (alias `sink`), attached to its stdio.
    async fn start_sink_container(&mut self, image: &ResolvedImage) -> Result<StartedSink, SandboxError> {
        let port = if self.sink_namespace { SHARED_SINK_PORT } else { SINK_PORT };
        let command = vec!["--bind".into(), "0.0.0.0".into(), "--port".into(), port.to_string()];
        let created =
            self.create("sink", image, "65534:65534".into(), command, Vec::new(), Some(port), &[], true, None).await?;
        let inspect = self.start_created(&created).await?;
        let facts = self.register(&created, &inspect).await?;
        let attached = created.take_attached();
        let failed = hardening::failures(&facts);
        if !failed.is_empty() {
            return Err(SandboxError::Hardening(failed.into_iter().map(|f| format!("sink {f}")).collect()));
        }
        // In its own namespace (the target joins it) the sink is on the loopback both share.
        let addr = if self.sink_namespace {
            SocketAddr::from(([127, 0, 0, 1], port))
        } else {
            container_addr(&inspect, port)?
        };
        let attached = attached.ok_or_else(|| SandboxError::NotReady("the sink's attach stream is missing".into()))?;
        let (records, control, _stderr) = split_attached(attached, 16 * 1024);
        self.stamp("sink_started");
        Ok(StartedSink { records, control, addr })
    }

    /// What this trial starts (set by the backend right after the network exists).
    pub(super) fn prepare(
        &mut self,
        spec: ContainerSpec,
        relay: Option<ResolvedImage>,
        sink_image: Option<ResolvedImage>,
        egress_proxy: Option<EgressProxySpec>,
    ) {
        self.plan = Some(Plan { spec, relay, sink_image, egress_proxy });
    }

    /// Create the sink's own network (internal, no host address, labelled like the trial's),
    /// shared only by the sink and the egress proxy.
    async fn create_sink_network(&mut self) -> Result<String, SandboxError> {
        let request = NetworkCreateRequest {
            name: format!("{}-sink", self.name),
            driver: Some("bridge".into()),
            internal: Some(true),
            labels: Some(self.labels.clone()),
            options: Some(HashMap::from([(INHIBIT_IPV4.to_owned(), "true".to_owned())])),
            ..NetworkCreateRequest::default()
        };
        let created =
            docker::call("create the sink's network", CALL_DEADLINE, self.docker.create_network(request)).await?;
        self.sink_network_id = Some(created.id.clone());
        Ok(created.id)
    }

    /// The canary sink behind an allowlisting egress proxy: the sink alone on a network of
    /// its own, the proxy (the sink image in `--proxy-upstream` mode) on the trial network —
    /// under [`EGRESS_PROXY_ALIAS`] and every routed host — and on the sink's network. The
    /// target can reach the sink only through the proxy.
    async fn start_sink_behind_proxy(
        &mut self,
        image: &ResolvedImage,
        proxy: &EgressProxySpec,
    ) -> Result<SinkChannel, SandboxError> {
        let sink_network = self.create_sink_network().await?;
        let trial_network = self.network_id.clone().unwrap_or_default();
        let command = vec!["--bind".into(), "0.0.0.0".into(), "--port".into(), SINK_PORT.to_string()];
        let placement = Some((sink_network.clone(), vec!["sink".to_owned()]));
        let sink = self
            .create("sink", image, "65534:65534".into(), command, Vec::new(), Some(SINK_PORT), &[], true, placement)
            .await?;
        let inspect = self.start_created(&sink).await?;
        let facts = self.register_on(&sink, &inspect, sink_network.clone(), Vec::new()).await?;
        let failed = hardening::failures(&facts);
        if !failed.is_empty() {
            return Err(SandboxError::Hardening(failed.into_iter().map(|f| format!("sink {f}")).collect()));
        }
        let sink_addr = container_addr(&inspect, SINK_PORT)?;
        let sink_stdio =
            sink.take_attached().ok_or_else(|| SandboxError::NotReady("the sink's attach stream is missing".into()))?;

        let mut command = vec![
            "--bind".into(),
            "0.0.0.0".into(),
            "--port".into(),
            PROXY_PORT.to_string(),
            "--proxy-upstream".into(),
            sink_addr.to_string(),
        ];
        for host in &proxy.allow {
            command.extend(["--allow".to_owned(), host.clone()]);
        }
        let mut aliases = vec![EGRESS_PROXY_ALIAS.to_owned()];
        aliases.extend(proxy.route.iter().filter(|h| h.as_str() != EGRESS_PROXY_ALIAS).cloned());
        let placement = Some((trial_network.clone(), aliases.clone()));
        let created = self
            .create(
                "egress_proxy",
                image,
                "65534:65534".into(),
                command,
                Vec::new(),
                Some(PROXY_PORT),
                &[],
                true,
                placement,
            )
            .await?;
        let connect = NetworkConnectRequest { container: created.id.clone(), endpoint_config: None };
        docker::call(
            "connect the egress proxy to the sink's network",
            CALL_DEADLINE,
            self.docker.connect_network(&sink_network, connect),
        )
        .await?;
        let inspect = self.start_created(&created).await?;
        let facts = self.register_on(&created, &inspect, trial_network.clone(), vec![sink_network.clone()]).await?;
        let failed = hardening::failures(&facts);
        if !failed.is_empty() {
            return Err(SandboxError::Hardening(failed.into_iter().map(|f| format!("egress proxy {f}")).collect()));
        }
        let address = inspect["NetworkSettings"]["Networks"]
            .as_object()
            .and_then(|m| m.values().find(|n| n["NetworkID"] == trial_network.as_str()))
            .map(|n| n["IPAddress"].clone())
            .unwrap_or(Value::Null);
        let proxy_stdio = created
            .take_attached()
            .ok_or_else(|| SandboxError::NotReady("the egress proxy's attach stream is missing".into()))?;
        if let Some(Value::Object(entry)) = self.record.get_mut("egress_proxy") {
            entry.insert("allow".into(), json!(proxy.allow));
            entry.insert("aliases".into(), json!(aliases));
            entry.insert("address".into(), json!({"network": trial_network, "ip": address, "port": PROXY_PORT}));
            entry.insert("upstream".into(), json!(sink_addr.to_string()));
        }
        if let Some(Value::Object(entry)) = self.record.get_mut("sink") {
            entry.insert(
                "address".into(),
                json!({"network": sink_network, "ip": sink_addr.ip().to_string(), "port": SINK_PORT}),
            );
        }
        let sink_net = self.network(&sink_network).await?;
        self.record.insert(
            "sink_network".into(),
            json!({"id": sink_network, "name": sink_net["Name"], "internal": sink_net["Internal"], "members": ["sink", "egress_proxy"]}),
        );
        let (records, control, _stderr) = split_attached(sink_stdio, 16 * 1024);
        let (proxy_records, proxy_control, _proxy_stderr) = split_attached(proxy_stdio, 16 * 1024);
        self.stamp("sink_started");
        Ok(SinkChannel {
            records: Box::new(records),
            control,
            url: Some(format!("http://{EGRESS_PROXY_ALIAS}")),
            direct_url: Some(format!("http://{sink_addr}")),
            proxy: Some(ProxyChannel { records: Box::new(proxy_records), control: proxy_control }),
            placement: "behind_egress_proxy",
        })
    }

    /// Start the target container, check its hardening, and wait for its port (HTTP) or
    /// hand back its stdio. With `relay` (a relay image), an HTTP server is reached through a
    /// relay container in the target's network namespace and a listener on the runner's
    /// 127.0.0.1 instead of directly, so the trial needs no host address (nor, without a sink
    /// or the gateway, any network).
    async fn start_target_with(
        &mut self,
        spec: &ContainerSpec,
        relay: Option<&ResolvedImage>,
    ) -> Result<Endpoint, SandboxError> {
        let stdio = spec.mode == McpMode::Stdio;
        let port = match &spec.mode {
            McpMode::Http { port, .. } => Some(*port),
            McpMode::Stdio => None,
        };
        let user = format!("{}:{}", spec.uid, spec.gid);
        // In the sink's namespace: joined, so the sink (started first) must exist.
        let placement = if self.sink_namespace {
            let sink = self.container_of("sink").ok_or_else(|| {
                SandboxError::NotReady("the target joins the canary sink's namespace, but no sink was started".into())
            })?;
            Some((format!("{}{sink}", hardening::SHARED_PREFIX), Vec::new()))
        } else {
            None
        };
        let target_network = placement.as_ref().map(|(id, _)| id.clone());
        let target = self
            .create(
                "target",
                &spec.image,
                user,
                spec.command.clone(),
                spec.env.clone(),
                port,
                &spec.volumes,
                stdio,
                placement,
            )
            .await?;
        // The relay joins the target's network namespace, so it is created now and started
        // once the target runs (a namespace can only be joined while it exists).
        let relay = match (relay, port) {
            (Some(image), Some(port)) => {
                let command = vec![
                    "relay-mux".into(),
                    format!("127.0.0.1:{port}"),
                    "--probe-seconds".into(),
                    spec.startup_timeout.as_secs().max(1).to_string(),
                ];
                let shared = format!("{}{}", hardening::SHARED_PREFIX, target.id);
                let placement = Some((shared, Vec::new()));
                let user = "65534:65534".to_owned();
                Some(self.create("relay", image, user, command, Vec::new(), None, &[], true, placement).await?)
            }
            _ => None,
        };
        let inspect = self.start_created(&target).await?;
        self.stamp("started");
        let facts = match target_network {
            Some(shared) => self.register_on(&target, &inspect, shared, Vec::new()).await?,
            None => self.register(&target, &inspect).await?,
        };
        let attached = target.take_attached();
        let failed = hardening::failures(&facts);
        self.record.insert("hardening".into(), serde_json::to_value(&facts).unwrap_or(Value::Null));
        self.record.insert("hardening_asserted".into(), json!(failed.is_empty()));
        if !failed.is_empty() {
            return Err(SandboxError::Hardening(failed));
        }
        if let Some(relay) = &relay {
            let port = port.unwrap_or_default();
            // A server that already stopped leaves no namespace to join.
            if inspect["State"]["Running"] == false {
                return Err(ready::stopped_before_port(&inspect["State"], port));
            }
            let started = self.start_relay(relay, &target.id, port).await?;
            let shared = format!("{}{}", hardening::SHARED_PREFIX, target.id);
            let relay_facts = self.register_on(relay, &started, shared, Vec::new()).await?;
            let failed = hardening::failures(&relay_facts);
            if !failed.is_empty() {
                return Err(SandboxError::Hardening(failed.into_iter().map(|f| format!("relay {f}")).collect()));
            }
        }
        match (&spec.mode, attached) {
            (McpMode::Stdio, Some(attached)) => Ok(Endpoint::Stdio(attached)),
            (McpMode::Http { port, path }, _) => {
                let id = self.container_id().unwrap_or_default().to_owned();
                if let Some(relay) = relay {
                    // The relay reaches the server on the loopback of their shared namespace.
                    self.record.insert("endpoint".into(), json!(format!("127.0.0.1:{port}")));
                    let local = self.serve_relay(&relay, &id, *port, spec.startup_timeout).await?;
                    self.stamp("port_open");
                    return Ok(Endpoint::Http { url: format!("http://localhost:{}{path}", local.port()), addr: local });
                }
                let addr = container_addr(&inspect, *port)?;
                self.record.insert("endpoint".into(), json!(addr.to_string()));
                self.wait_for_port(&id, addr, spec.startup_timeout).await?;
                self.stamp("port_open");
                Ok(Endpoint::Http { url: format!("http://localhost:{port}{path}"), addr })
            }
            (McpMode::Stdio, None) => Err(SandboxError::NotReady("the attach stream is missing".into())),
        }
    }

    /// Network, then target (no sink): the common case in one call. On failure everything
    /// created is removed and the lifecycle record returned with the error.
    pub async fn start(
        engine: &DockerEngine,
        spec: &ContainerSpec,
    ) -> Result<(TrialContainer, TargetEndpoint), (SandboxError, Value)> {
        let mut this = TrialContainer::new_network(engine, spec).await?;
        match this.start_target_with(spec, None).await {
            Ok(endpoint) => Ok((this, endpoint.into_target(spec.stderr_bytes))),
            Err(e) => {
                this.note_error(&e);
                let (record, _) = this.teardown().await;
                Err((e, record))
            }
        }
    }

    async fn inspect(&self, id: &str) -> Result<Value, SandboxError> {
        let inspect = docker::call(
            "inspect a trial container",
            CALL_DEADLINE,
            self.docker.inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?;
        Ok(serde_json::to_value(&inspect).unwrap_or(Value::Null))
    }
}

impl Endpoint {
    fn into_target(self, stderr_bytes: usize) -> TargetEndpoint {
        match self {
            Endpoint::Http { url, addr } => TargetEndpoint::Http { url, connect_to: addr },
            Endpoint::Stdio(attached) => {
                let (output, input, stderr) = split_attached(attached, stderr_bytes);
                TargetEndpoint::Stdio { output: Box::new(output), input, stderr }
            }
        }
    }
}

#[async_trait::async_trait]
impl TrialSandbox for TrialContainer {
    async fn start_sink(&mut self) -> Result<SinkChannel, SandboxError> {
        self.needs_network("start the canary sink")?;
        let image =
            self.plan.as_ref().and_then(|p| p.sink_image.clone()).ok_or_else(|| {
                SandboxError::NotReady("the canary sink image was not resolved before the run".into())
            })?;
        if let Some(proxy) = self.plan.as_ref().and_then(|p| p.egress_proxy.clone()) {
            return self.start_sink_behind_proxy(&image, &proxy).await.map_err(|e| {
                SandboxError::NotReady(format!("failed to start the canary sink and its egress proxy: {e}"))
            });
        }
        let started = self
            .start_sink_container(&image)
            .await
            .map_err(|e| SandboxError::NotReady(format!("failed to start the canary sink: {e}")))?;
        Ok(SinkChannel {
            records: Box::new(started.records),
            control: started.control,
            url: Some(format!("http://{}", started.addr)),
            direct_url: None,
            proxy: None,
            placement: if self.sink_namespace { "sink_namespace" } else { "trial_network" },
        })
    }

    async fn start_target(&mut self, command: Vec<String>) -> Result<TargetEndpoint, SandboxError> {
        let Plan { mut spec, relay, .. } =
            self.plan.clone().ok_or_else(|| SandboxError::NotReady("the trial's sandbox was not prepared".into()))?;
        spec.command = command;
        let endpoint = self.start_target_with(&spec, relay.as_ref()).await?;
        crate::crashpoint::reach(CrashPoint::Start);
        Ok(endpoint.into_target(spec.stderr_bytes))
    }

    async fn network_gateway(&mut self) -> Result<String, SandboxError> {
        self.needs_network("find the trial network's gateway")?;
        let id = self.network_id.clone().ok_or_else(|| SandboxError::NotReady("the trial network is gone".into()))?;
        let network = self.network(&id).await?;
        let gateway = gateway_of(&network).ok_or_else(|| {
            SandboxError::NotReady(format!(
                "failed to find the trial network's gateway: the engine reports no IPv4 gateway in IPAM.Config ({})",
                network["IPAM"]["Config"]
            ))
        })?;
        self.record.insert("network_gateway".into(), json!(gateway));
        Ok(gateway)
    }

    fn mark_ready(&mut self) {
        self.stamp("ready");
    }

    fn note_error(&mut self, error: &SandboxError) {
        TrialContainer::note_error(self, error);
    }

    /// A consistent snapshot of a SQLite database (and its -wal/-journal) inside the target
    /// container, taken through the engine's archive API while the container is paused.
    async fn snapshot(&self, path: &str, max_bytes: u64) -> Result<SnapshotFiles, SandboxError> {
        let id = self.container_id().ok_or_else(|| SandboxError::NotReady("the target container is gone".into()))?;
        super::snapshot::snapshot(&self.docker, id, path, max_bytes, Duration::from_secs(15)).await
    }

    /// The archive of `path` through the engine's archive API (the container keeps running).
    async fn archive(&self, path: &str, max_bytes: u64) -> Result<Fetched, SandboxError> {
        let id = self.container_id().ok_or_else(|| SandboxError::NotReady("the target container is gone".into()))?;
        super::archive::download(&self.docker, id, path, max_bytes, Duration::from_secs(15)).await
    }

    async fn teardown(self: Box<Self>) -> (Value, Vec<String>) {
        TrialContainer::teardown(*self).await
    }
}

/// The first IPv4 gateway of a network inspection's `IPAM.Config`.
fn gateway_of(network: &Value) -> Option<String> {
    network["IPAM"]["Config"].as_array()?.iter().find_map(|c| {
        let gateway = c["Gateway"].as_str()?;
        gateway.parse::<std::net::Ipv4Addr>().ok().map(|ip| ip.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_the_first_ipv4_gateway_of_the_network() {
        let network = json!({"IPAM": {"Config": [{"Subnet": "fd00::/64", "Gateway": "fd00::1"}, {"Subnet": "172.30.0.0/16", "Gateway": "172.30.0.1"}]}});
        assert_eq!(gateway_of(&network).as_deref(), Some("172.30.0.1"));
        assert_eq!(gateway_of(&json!({"IPAM": {"Config": [{"Subnet": "172.30.0.0/16"}]}})), None);
        assert_eq!(gateway_of(&json!({"IPAM": {"Config": null}})), None);
    }
}
