//! Measures the Docker sandbox's per-job overhead: create + attach + start + wait + remove of a
//! container running `true`, over a freshly copied tree, as a worker runs it. Run by
//! deploy/bench-docker.sh, which compares the figure with a bare `docker run --rm IMAGE true`.
//! Also measures the engine's own floor through the same API (create + start + wait + remove
//! of `true` with no mounts, limits or attach) and the per-job tree copy the worker makes.
//!
//! Usage: docker_overhead RUNS TREE_FILES

use assay_worker::sandbox::docker::{DockerConfig, DockerSandbox};
use assay_worker::sandbox::{Sandbox, SandboxExit, SandboxRun, clean_env};
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use futures::StreamExt;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().as_deref().unwrap_or("20").parse()?;
    let tree_files: usize = args.next().as_deref().unwrap_or("200").parse()?;
    let sandbox = DockerSandbox::connect(DockerConfig::default(), "bench-overhead").await?;
    sandbox.check_image().await?;
    sandbox.reap_leftovers().await?;

    let root = tempfile::tempdir()?;
    let source = root.path().join("source");
    for file in 0..tree_files {
        let path = source.join(format!("pager/module_{}/page_{file}.py", file % 20));
        std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
        std::fs::write(
            path,
            format!("def page_{file}():\n    return {file}\n").repeat(40),
        )?;
    }

    let mut samples = Vec::with_capacity(runs);
    let mut copies = Vec::with_capacity(runs);
    for run_index in 0..=runs {
        let job_dir = root.path().join(format!("job-{run_index}"));
        let tree = job_dir.join("tree");
        let scratch = job_dir.join("scratch");
        std::fs::create_dir_all(&scratch)?;
        let copy_started = Instant::now();
        copy_tree(&source, &tree)?;
        let copied = copy_started.elapsed();
        let run = SandboxRun {
            proof_id: "bench".into(),
            job_id: format!("bench-{run_index}"),
            tree_dir: tree,
            scratch_dir: scratch.clone(),
            proof_dir: root.path().to_path_buf(),
            command: vec!["true".into()],
            env: clean_env(&[]),
            stdout_path: scratch.join("stdout"),
            stderr_path: scratch.join("stderr"),
            timeout: Duration::from_secs(60),
            forked_timeout: None,
            network: false,
            vendored: None,
        };
        let started = Instant::now();
        let exit = sandbox.run(&run).await?;
        let elapsed = started.elapsed();
        if exit != SandboxExit::Exited(0) {
            return Err(format!("run {run_index} ended {exit:?}").into());
        }
        // The first run warms the engine's caches; it is not a sample.
        if run_index > 0 {
            samples.push(elapsed);
            copies.push(copied);
        }
        std::fs::remove_dir_all(&job_dir)?;
    }
    print_stats("sandbox_run_ms", &mut samples);
    print_stats("tree_copy_ms", &mut copies);
    print_stats("api_floor_ms", &mut api_floor(runs).await?);
    Ok(())
}

/// create + start + wait + remove of `true` with networking off and nothing else: what the
/// engine spends per container when asked through its API, without mounts, limits, init,
/// read-only root, attach or the tree's ownership change.
async fn api_floor(runs: usize) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let docker = Docker::connect_with_unix_defaults()?
        .negotiate_version()
        .await?;
    let mut samples = Vec::with_capacity(runs);
    for run_index in 0..=runs {
        let started = Instant::now();
        let body = ContainerCreateBody {
            image: Some(DockerConfig::default().image),
            cmd: Some(vec!["true".into()]),
            // As the sandbox does: without it the engine builds a network namespace through
            // its network stack even for `--network none`, about half of a container's cost.
            network_disabled: Some(true),
            labels: Some([("assay.worker_id".to_owned(), "bench-overhead".to_owned())].into()),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = docker.create_container(None, body).await?.id;
        docker.start_container(&id, None).await?;
        let waited = docker.wait_container(&id, None).next().await;
        let remove = RemoveContainerOptionsBuilder::default().force(true).build();
        docker.remove_container(&id, Some(remove)).await?;
        match waited {
            Some(Ok(response)) if response.status_code == 0 => {}
            other => return Err(format!("floor run {run_index} ended {other:?}").into()),
        }
        if run_index > 0 {
            samples.push(started.elapsed());
        }
    }
    Ok(samples)
}

fn print_stats(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name} mean={:.1} median={:.1} min={:.1} max={:.1} runs={}",
        ms(mean),
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
