//! `karpenter-capi`: the admin CLI and web UI. Parses arguments, calls the admin library,
//! prints. Exit codes (also in `--help`): 0 ok; 1 API or other failure; 2 bad input;
//! 3 refused (ambiguous state; `--force` to override); 4 no hand-off record; 5 declined at
//! the confirmation prompt; 6 `cas status` found an overlap (a resource both CAS and we act on).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use karpenter_capi_admin::cas::{self, DisableOptions};
use karpenter_capi_admin::catalog::PriceCatalog;
use karpenter_capi_admin::install::{self, InstallOptions};
use karpenter_capi_admin::output::{self, Style};
use karpenter_capi_admin::progress::{Progress, Step};
use karpenter_capi_admin::selection::Selection;
use karpenter_capi_admin::setup::{self, SetupOptions};
use karpenter_capi_admin::{
    Clusters, ConnectOptions, Error, discover, explain, scenario, status, ui,
};
use serde::Serialize;

const EXIT_CODES: &str = "Exit codes: 0 ok; 1 API or other failure; 2 bad input; 3 refused (ambiguous state, use --force); 4 no CAS hand-off record; 5 declined at the prompt; 6 `cas status` found a resource both CAS and we would scale.";

#[derive(Debug, Parser)]
#[command(name = "karpenter-capi", version, about = "Set up, inspect and hand over autoscaling to karpenter-capi on Cluster API and OpenShift clusters.", after_help = EXIT_CODES)]
struct Cli {
    /// Kubeconfig of the workload cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, global = true, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long, global = true)]
    context: Option<String>,
    /// Kubeconfig of the management cluster (MachineDeployments, MachineSets, Machines);
    /// default: the workload cluster.
    #[arg(long, global = true, env = "CLUSTER_API_KUBECONFIG")]
    cluster_api_kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Only look at these namespaces (scalable resources, CAS Deployments,
    /// MachineAutoscalers), e.g. a HyperShift control-plane namespace. Repeatable.
    #[arg(long = "only-namespace", global = true)]
    only_namespaces: Vec<String>,
    /// Our namespace (controller, CAS hand-off record).
    #[arg(long, global = true, default_value = "karpenter-capi")]
    namespace: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Yaml,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every scalable resource in reach: capacity and its source, zones, price, min/max,
    /// membership, CAS management, problems.
    Discover,
    /// Fill capacity, price and member label on selected resources; create the NodeClass
    /// and a default NodePool. Shows a diff and asks unless --yes.
    Setup {
        /// Resources: `name`, `namespace/name` or `Kind.group/namespace/name`.
        names: Vec<String>,
        /// Label selector (`k=v,k2!=v2,k3,!k4`).
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Select every scalable resource.
        #[arg(long)]
        all: bool,
        /// Price/shape catalog CSV (instance_type,vcpu,memory_mib,gpu,arch,on_demand_usd_per_hour).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Hourly price for selected resources without one.
        #[arg(long)]
        price: Option<String>,
        #[arg(long, default_value = "default")]
        nodeclass: String,
        #[arg(long, default_value = "default")]
        nodepool: String,
        /// Do not create a NodePool.
        #[arg(long)]
        no_nodepool: bool,
        /// Apply without asking.
        #[arg(short, long)]
        yes: bool,
        /// Print the objects and changes, apply nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The Cluster Autoscaler hand-off.
    #[command(subcommand)]
    Cas(CasCommand),
    /// Render (and apply) the controller's Helm chart.
    Install {
        #[arg(long, default_value = "karpenter-capi")]
        release: String,
        /// OpenShift specifics (security context, Machine API namespace, notes).
        #[arg(long)]
        openshift: bool,
        /// Secret with key `kubeconfig` for a separate management cluster.
        #[arg(long)]
        management_kubeconfig_secret: Option<String>,
        /// Extra chart values (`k=v`), repeatable.
        #[arg(long = "set")]
        set: Vec<String>,
        /// The helm binary.
        #[arg(long, env = "HELM")]
        helm: Option<PathBuf>,
        /// Print the rendered manifests instead of applying them.
        #[arg(long)]
        render: bool,
        /// Apply with server-side dry-run (validates, persists nothing).
        #[arg(long)]
        dry_run: bool,
    },
    /// NodePools, NodeClaims, nodes and their cost, pending pods and why, our last
    /// decisions (events) and the next decision's gap to the lower bound.
    Status,
    /// Why a pod is pending and what the autoscaler would launch for it.
    Explain {
        /// `namespace/name` (`name` alone: namespace `default`).
        pod: String,
    },
    /// Write the cluster's state as a simulator scenario (`karpenter-capi-sim run
    /// <dir>/scenario.yaml`).
    Snapshot {
        /// Directory for `scenario.yaml` and `cluster.yaml` (created if missing).
        #[arg(long, default_value = "karpenter-capi-snapshot")]
        out: PathBuf,
    },
    /// Serve the web UI.
    Ui {
        #[arg(long, default_value = "127.0.0.1:8090")]
        listen: std::net::SocketAddr,
    },
    /// Print shell completions.
    Completions { shell: clap_complete::Shell },
}

#[derive(Debug, Subcommand)]
enum CasCommand {
    /// Who manages which resource; overlaps; what disable would refuse.
    Status,
    /// Record, then scale CAS to 0 / delete OpenShift's autoscaler objects and take member
    /// resources out of CAS's reach.
    Disable {
        /// Proceed past ambiguities (two CAS, unknown owner, managed-service objects).
        #[arg(long)]
        force: bool,
    },
    /// Restore exactly what disable changed.
    Enable,
}

fn print<T: Serialize>(format: Format, value: &T, table: impl FnOnce() -> String) -> Result<()> {
    let text = match format {
        Format::Table => table(),
        Format::Json => serde_json::to_string_pretty(value)? + "\n",
        Format::Yaml => serde_saphyr::to_string(value)?,
    };
    print!("{text}");
    Ok(())
}

/// A progress bar on stderr when it is a terminal; otherwise reports nowhere (scripts and
/// logs get the final lines only).
fn progress_bar() -> (Progress, Option<ProgressBar>) {
    if !std::io::stderr().is_terminal() {
        return (Progress::none(), None);
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let b = bar.clone();
    let p = Progress::new(move |s: &Step| {
        b.set_length(s.total as u64);
        b.set_position(s.done as u64);
        b.set_message(s.message.clone());
    });
    (p, Some(bar))
}

fn finish(bar: Option<ProgressBar>) {
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn confirm(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).is_ok() && matches!(line.trim(), "y" | "Y" | "yes")
}

async fn run(cli: Cli) -> Result<u8, Error> {
    let style = Style {
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    if let Command::Completions { shell } = &cli.command {
        clap_complete::generate(
            *shell,
            &mut Cli::command(),
            "karpenter-capi",
            &mut std::io::stdout(),
        );
        return Ok(0);
    }
    let connect = ConnectOptions {
        kubeconfig: cli.kubeconfig.clone(),
        context: cli.context.clone(),
        cluster_api_kubeconfig: cli.cluster_api_kubeconfig.clone(),
        namespaces: Some(cli.only_namespaces.clone()),
    };
    let fmt_err = |e: anyhow::Error| Error::Invalid(e.to_string());
    match cli.command {
        Command::Completions { .. } => Ok(0),
        Command::Discover => {
            let clusters = Clusters::connect(&connect).await?;
            let d = discover::discover(&clusters, &cli.namespace).await?;
            print(cli.output, &d, || output::discovery_table(&d, style)).map_err(fmt_err)?;
            Ok(0)
        }
        Command::Setup {
            names,
            selector,
            all,
            catalog,
            price,
            nodeclass,
            nodepool,
            no_nodepool,
            yes,
            dry_run,
        } => {
            let price = match price {
                Some(p) => Some(karpenter_capi_admin::setup_price(&p)?),
                None => None,
            };
            let opts = SetupOptions {
                selection: Selection {
                    names,
                    selector,
                    all,
                },
                catalog: catalog.as_deref().map(PriceCatalog::load).transpose()?,
                price,
                nodeclass,
                nodepool: (!no_nodepool).then_some(nodepool),
            };
            let clusters = Clusters::connect(&connect).await?;
            let plan = setup::plan(&clusters, &opts).await?;
            for n in &plan.notes {
                eprintln!("{}", style.yellow(&format!("note: {n}")));
            }
            if dry_run {
                print(cli.output, &plan, || plan.objects_yaml()).map_err(fmt_err)?;
                return Ok(0);
            }
            if plan.is_empty() {
                println!("Nothing to change.");
                return Ok(0);
            }
            print!("{}", plan.diff());
            if !yes && !confirm("Apply these changes?") {
                eprintln!("Nothing applied.");
                return Ok(5);
            }
            let (progress, bar) = progress_bar();
            let applied = setup::apply_with(&clusters, &plan, &progress).await;
            finish(bar);
            for d in applied? {
                println!("{d}");
            }
            Ok(0)
        }
        Command::Cas(c) => {
            let clusters = Clusters::connect(&connect).await?;
            match c {
                CasCommand::Status => {
                    let s = cas::status(&clusters, &cli.namespace).await?;
                    print(cli.output, &s, || output::cas_table(&s, style)).map_err(fmt_err)?;
                    Ok(if s.overlaps().next().is_some() { 6 } else { 0 })
                }
                CasCommand::Disable { force } => {
                    let (progress, bar) = progress_bar();
                    let r = cas::disable(
                        &clusters,
                        &cli.namespace,
                        &DisableOptions {
                            force,
                            progress,
                            ..DisableOptions::default()
                        },
                    )
                    .await;
                    finish(bar);
                    let r = r?;
                    print(cli.output, &r, || report_text(&r, style)).map_err(fmt_err)?;
                    Ok(0)
                }
                CasCommand::Enable => {
                    let (progress, bar) = progress_bar();
                    let r = cas::enable_with(&clusters, &cli.namespace, &progress).await;
                    finish(bar);
                    let r = r?;
                    print(cli.output, &r, || report_text(&r, style)).map_err(fmt_err)?;
                    Ok(0)
                }
            }
        }
        Command::Install {
            release,
            openshift,
            management_kubeconfig_secret,
            set,
            helm,
            render,
            dry_run,
        } => {
            let opts = InstallOptions {
                release,
                namespace: cli.namespace.clone(),
                openshift,
                management_kubeconfig_secret,
                set,
                helm,
            };
            if openshift {
                eprint!("{}", install::OPENSHIFT_NOTES);
            }
            let clusters = Clusters::connect(&connect).await?;
            let (progress, bar) = progress_bar();
            let lines = install::install_with(&clusters, &opts, render, dry_run, &progress).await;
            finish(bar);
            for line in lines? {
                println!("{line}");
            }
            Ok(0)
        }
        Command::Status => {
            let clusters = Clusters::connect(&connect).await?;
            let s = status::status(&clusters).await?;
            print(cli.output, &s, || output::status_text(&s, style)).map_err(fmt_err)?;
            Ok(0)
        }
        Command::Explain { pod } => {
            let clusters = Clusters::connect(&connect).await?;
            let e = explain::explain(&clusters, &pod).await?;
            print(cli.output, &e, || output::explain_text(&e, style)).map_err(fmt_err)?;
            Ok(0)
        }
        Command::Snapshot { out } => {
            let clusters = Clusters::connect(&connect).await?;
            let files = scenario::snapshot(&clusters, "cluster.yaml").await?;
            std::fs::create_dir_all(&out)?;
            let scenario_path = out.join("scenario.yaml");
            std::fs::write(&scenario_path, &files.scenario)?;
            std::fs::write(out.join(&files.cluster_file), &files.cluster)?;
            for n in &files.notes {
                eprintln!("{}", style.yellow(&format!("note: {n}")));
            }
            #[derive(Serialize)]
            struct Written<'a> {
                scenario: String,
                pods: usize,
                nodes: usize,
                instance_types: usize,
                notes: &'a [String],
            }
            let w = Written {
                scenario: scenario_path.display().to_string(),
                pods: files.pods,
                nodes: files.nodes,
                instance_types: files.instance_types,
                notes: &files.notes,
            };
            print(cli.output, &w, || {
                format!(
                    "wrote {} ({} pods, {} nodes, {} instance types)\nreplay: karpenter-capi-sim run {}\n",
                    w.scenario, w.pods, w.nodes, w.instance_types, w.scenario
                )
            })
            .map_err(fmt_err)?;
            Ok(0)
        }
        Command::Ui { listen } => {
            let clusters = Clusters::connect(&connect).await?;
            let (listener, state, url) = ui::bind(clusters, &cli.namespace, listen).await?;
            println!("karpenter-capi UI: open {url}");
            ui::serve(listener, state).await?;
            Ok(0)
        }
    }
}

fn report_text(r: &cas::HandoffReport, style: Style) -> String {
    let mut out = String::new();
    for a in &r.actions {
        out.push_str(&format!("{a}\n"));
    }
    for w in &r.warnings {
        out.push_str(&style.yellow(&format!("warning: {w}\n")));
    }
    out
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
