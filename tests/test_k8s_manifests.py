"""examples/k8s: the Kubernetes manifests of a multi-host torchtpu.train run.

No cluster and no network: every document is validated against a schema, and
the values that must agree across the manifest are checked.

- Core objects (PersistentVolumeClaim, ...) against Kubernetes' own strict
  JSON schema (no unknown field anywhere) of K8S_VERSION, as kubernetes-validate
  ships it.
- The JobSet (jobset.x-k8s.io/v1alpha2, a custom resource the core schemas do
  not have) against JOBSET_SCHEMA below, written from JobSet's API reference:
  strict for JobSetSpec, ReplicatedJob, Network, FailurePolicy, SuccessPolicy,
  StartupPolicy; its metadata against Kubernetes' strict ObjectMeta. Each
  replicatedJob's template is a batch/v1 JobTemplateSpec: wrapped as a Job,
  it goes through Kubernetes' strict Job schema (pod spec, containers, volumes).
- Semantics: torchrun's --nnodes is the Job's parallelism, the rendezvous
  endpoint is the JobSet's first pod, the node rank comes from the Job
  completion index, the cache key file is in the Secret's mount and the shared
  cache on the ReadWriteMany volume's; the GKE variant asks for TPU chips on a
  TPU node pool.
"""
import copy
import importlib.resources
import json
import math
import os
import posixpath
import re

import jsonschema
import kubernetes_validate
import pytest
import referencing
import referencing.jsonschema
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.path.join(ROOT, "examples", "k8s")
MANIFESTS = ["jobset.yaml", "jobset-gke-tpu.yaml"]
K8S_VERSION = "1.33.0"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
TPU = "google.com/tpu"
TPU_NODE_LABELS = ("cloud.google.com/gke-tpu-accelerator", "cloud.google.com/gke-tpu-topology")

# ---- the JobSet's schema (JobSet API reference, v1alpha2) --------------------

_DEFS = "https://kubernetes.io/api/_definitions.json"
OBJECT_META = {"$ref": f"{_DEFS}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
INT32 = {"type": "integer", "minimum": -(2 ** 31), "maximum": 2 ** 31 - 1}
NON_NEGATIVE = {**INT32, "minimum": 0}
STRINGS = {"type": "array", "items": {"type": "string"}}
DNS_LABEL = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}


def _strict(properties, required=()):
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


REPLICATED_JOB = _strict({
    "name": DNS_LABEL,
    "replicas": NON_NEGATIVE,
    # batch/v1 JobTemplateSpec: its spec is checked as a Job's (validate_job).
    "template": _strict({"metadata": OBJECT_META, "spec": {"type": "object"}}, ["spec"]),
    "dependsOn": {"type": "array", "maxItems": 5, "items": _strict(
        {"name": {"type": "string"}, "status": {"enum": ["Ready", "Complete"]}}, ["name", "status"])},
}, ["name", "template"])
NETWORK = _strict({
    "enableDNSHostnames": {"type": "boolean"},
    "subdomain": DNS_LABEL,
    "publishNotReadyAddresses": {"type": "boolean"},
})
FAILURE_POLICY_RULE = _strict({
    "name": {"type": "string", "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
    "action": {"enum": ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts",
                        "RestartJob", "RestartJobAndIgnoreMaxRestarts"]},
    "onJobFailureReasons": STRINGS,
    "onJobFailureMessagePatterns": STRINGS,
    "targetReplicatedJobs": STRINGS,
}, ["action"])
FAILURE_POLICY = _strict({
    "maxRestarts": NON_NEGATIVE,
    "restartStrategy": {"enum": ["Recreate", "BlockingRecreate", "InPlaceRestart"]},
    "rules": {"type": "array", "items": FAILURE_POLICY_RULE},
})
SUCCESS_POLICY = _strict({"operator": {"enum": ["All", "Any"]}, "targetReplicatedJobs": STRINGS}, ["operator"])
STARTUP_POLICY = _strict({"startupPolicyOrder": {"enum": ["AnyOrder", "InOrder"]}}, ["startupPolicyOrder"])
COORDINATOR = _strict({"replicatedJob": {"type": "string"}, "jobIndex": NON_NEGATIVE, "podIndex": NON_NEGATIVE},
                      ["replicatedJob"])
JOBSET_SPEC = _strict({
    "replicatedJobs": {"type": "array", "minItems": 1, "items": REPLICATED_JOB},
    "network": NETWORK,
    "successPolicy": SUCCESS_POLICY,
    "failurePolicy": FAILURE_POLICY,
    "startupPolicy": STARTUP_POLICY,
    "suspend": {"type": "boolean"},
    "coordinator": COORDINATOR,
    "managedBy": {"type": "string", "maxLength": 63},
    "ttlSecondsAfterFinished": NON_NEGATIVE,
}, ["replicatedJobs"])
JOBSET_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_strict({
        "apiVersion": {"const": JOBSET_API},
        "kind": {"const": "JobSet"},
        "metadata": {"allOf": [OBJECT_META, {"required": ["name"]}]},
        "spec": JOBSET_SPEC,
    }, ["apiVersion", "kind", "metadata", "spec"]),
}


def _k8s_definitions():
    """Kubernetes' strict definitions of K8S_VERSION, as kubernetes-validate ships them."""
    path = (importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
            / f"v{K8S_VERSION}-local-strict" / "_definitions.json")
    return json.loads(path.read_text())


_VALIDATOR = []


def jobset_validator():
    if not _VALIDATOR:
        defs = referencing.Resource.from_contents(_k8s_definitions(), referencing.jsonschema.DRAFT202012)
        registry = referencing.Registry().with_resource(_DEFS, defs)
        jsonschema.Draft202012Validator.check_schema(JOBSET_SCHEMA)
        _VALIDATOR.append(jsonschema.Draft202012Validator(JOBSET_SCHEMA, registry=registry))
    return _VALIDATOR[0]


# ---- validation -------------------------------------------------------------

def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def by_kind(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def job_of(jobset, rj):
    """A replicatedJob's template as the batch/v1 Job the JobSet controller makes of it."""
    template = rj["template"]
    metadata = dict(template.get("metadata") or {})
    metadata.setdefault("name", f"{jobset['metadata']['name']}-{rj['name']}-0")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": template["spec"]}


def validate_core(doc):
    """Kubernetes' strict schema of K8S_VERSION; raises kubernetes_validate.ValidationError."""
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def validate_jobset(doc):
    """JOBSET_SCHEMA on the envelope (raises jsonschema.ValidationError), then each
    replicatedJob's template as a strict batch/v1 Job (kubernetes_validate.ValidationError)."""
    jobset_validator().validate(doc)
    for rj in doc["spec"]["replicatedJobs"]:
        validate_core(job_of(doc, rj))


def validate_document(doc):
    if doc.get("apiVersion") == JOBSET_API:
        validate_jobset(doc)
    else:
        validate_core(doc)


# ---- reading the pod spec and torchrun's command line -------------------------

def parse_torchrun(argv):
    """(torchrun's options, the module, the module's arguments) from
    ['torchrun', '--opt=value' | '--opt', 'value', ..., '-m', module, args...]."""
    assert argv[0] == "torchrun", argv
    options, i = {}, 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-m", "--module"):
            return options, argv[i + 1], argv[i + 2:]
        assert arg.startswith("--"), f"torchrun: expected an option or -m, got {arg!r}"
        name, eq, value = arg[2:].partition("=")
        if eq:
            i += 1
        else:
            value, i = argv[i + 1], i + 2
        options[name.replace("_", "-")] = value
    raise AssertionError("torchrun runs no module (-m)")


def overrides(args):
    """Hydra's key=value overrides."""
    return dict(a.split("=", 1) for a in args if "=" in a)


def inside(path, root):
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return posixpath.isabs(path) and posixpath.commonpath([path, root]) == root


class Worker:
    """The replicatedJob that runs the trainer: its Job spec, pod spec and container."""

    def __init__(self, docs):
        self.docs = docs
        self.jobset = by_kind(docs, "JobSet")
        runners = [rj for rj in self.jobset["spec"]["replicatedJobs"]
                   if any(c.get("command", [None])[0] == "torchrun"
                          for c in rj["template"]["spec"]["template"]["spec"]["containers"])]
        assert len(runners) == 1, "expected one replicatedJob running torchrun"
        self.rj = runners[0]
        self.job = self.rj["template"]["spec"]
        self.pod = self.job["template"]["spec"]
        (self.container,) = [c for c in self.pod["containers"] if c.get("command", [None])[0] == "torchrun"]
        self.argv = self.container["command"] + self.container.get("args", [])
        self.options, self.module, self.module_args = parse_torchrun(self.argv)
        self.env = {e["name"]: e for e in self.container.get("env", [])}
        self.volumes = {v["name"]: v for v in self.pod.get("volumes", [])}
        self.mounts = self.container.get("volumeMounts", [])

    def env_value(self, name):
        assert name in self.env, f"the container sets no {name}"
        assert "value" in self.env[name], f"{name} is not a literal value"
        return self.env[name]["value"]

    def mount_of(self, path):
        """The volume mount holding `path` (the deepest one) and its volume."""
        holding = [m for m in self.mounts if inside(path, m["mountPath"])]
        assert holding, f"{path} is on no volume mount"
        mount = max(holding, key=lambda m: len(m["mountPath"]))
        return mount, self.volumes[mount["name"]]


def check_semantics(docs):
    """What must agree across the manifest; raises AssertionError."""
    w = Worker(docs)
    js_name = w.jobset["metadata"]["name"]
    network = w.jobset["spec"].get("network", {})

    # One pod per host, pods indexed 0..N-1, one Job.
    assert w.rj.get("replicas", 1) == 1
    assert w.job["completionMode"] == "Indexed"
    assert w.job["parallelism"] == w.job["completions"]
    assert w.job.get("backoffLimit") == 0, "a failed rank must fail the Job (the JobSet restarts it whole)"
    assert w.pod.get("restartPolicy") == "Never"
    assert "maxRestarts" in w.jobset["spec"].get("failurePolicy", {})

    # torchrun: as many nodes as pods; the rendezvous at the first pod.
    assert w.options.get("nnodes") == str(w.job["parallelism"]), \
        f"torchrun --nnodes {w.options.get('nnodes')} but the Job runs {w.job['parallelism']} pods"
    assert network.get("enableDNSHostnames") is True, "pods need DNS names for the rendezvous"
    subdomain = network.get("subdomain", js_name)
    host, _, port = w.options["rdzv-endpoint"].rpartition(":")
    assert host == f"{js_name}-{w.rj['name']}-0-0.{subdomain}", f"{host} is not the JobSet's first pod"
    assert port.isdigit()

    # The node rank is the pod's Job completion index.
    assert w.options.get("node-rank") == "$(NODE_RANK)"
    assert w.env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX, \
        "NODE_RANK must come from the Job completion index"
    assert w.options.get("rdzv-backend") == "static", "torchrun reads --node-rank only in its static rendezvous"
    for arg in w.argv:  # Kubernetes leaves an undefined $(NAME) as it is
        for name in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            assert name in w.env, f"{arg} names $({name}), which the container does not set"

    # Every mount has its volume.
    for m in w.mounts:
        assert m["name"] in w.volumes, f"volumeMount {m['name']} has no volume"

    # The shared compile cache and the run directory: on the ReadWriteMany claim.
    pvcs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    hydra_dir = overrides(w.module_args).get("hydra.run.dir")
    assert w.module == "torchtpu.train"
    assert hydra_dir, "hydra.run.dir must be set: the same path on every host"
    for what, path in [("TORCHTPU_SHARED_CACHE_DIR", w.env_value("TORCHTPU_SHARED_CACHE_DIR")),
                       ("hydra.run.dir", hydra_dir)]:
        mount, volume = w.mount_of(path)
        assert "persistentVolumeClaim" in volume, f"{what} {path} is not on the shared volume"
        claim = volume["persistentVolumeClaim"]["claimName"]
        assert claim in pvcs, f"{what}: claim {claim} is not in the manifest"
        assert "ReadWriteMany" in pvcs[claim]["spec"]["accessModes"]
        assert not mount.get("readOnly")

    # The key: a file of the Secret's mount, which nobody but its owner can write.
    key_file = w.env_value("TORCHTPU_CACHE_KEY_FILE")
    mount, volume = w.mount_of(key_file)
    assert "secret" in volume, f"TORCHTPU_CACHE_KEY_FILE {key_file} is not in a Secret's mount"
    secret = volume["secret"]
    assert secret["secretName"] == "torchtpu-cache-key"
    relative = posixpath.relpath(key_file, mount["mountPath"])
    paths = [item["path"] for item in secret.get("items", [])] or [relative]
    assert relative in paths, f"the Secret's volume has no file {relative}"
    assert secret.get("defaultMode", 0o644) & 0o022 == 0
    return w


# ---- the tests ------------------------------------------------------------------

@pytest.mark.parametrize("name", MANIFESTS)
def test_every_document_validates(name):
    docs = load(name)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["JobSet", "PersistentVolumeClaim"], kinds
    for doc in docs:
        validate_document(doc)


@pytest.mark.parametrize("name", MANIFESTS)
def test_semantics(name):
    check_semantics(load(name))


def test_cpu_variant():
    w = check_semantics(load("jobset.yaml"))
    assert "TORCHTPU_PJRT_PLUGIN" not in w.env, "on CPU nodes the XLA:CPU plugin is the default"
    assert int(w.options["nproc-per-node"]) >= 1


def test_gke_tpu_variant():
    w = check_semantics(load("jobset-gke-tpu.yaml"))
    selector = w.pod.get("nodeSelector", {})
    for label in TPU_NODE_LABELS:
        assert selector.get(label), f"nodeSelector has no {label}"
    resources = w.container["resources"]
    chips = int(resources["limits"][TPU])
    assert int(resources["requests"][TPU]) == chips
    assert w.env_value("TORCHTPU_PJRT_PLUGIN") == "tpu"
    # One process per host (libtpu opens all the host's chips); a pod per host of the slice.
    assert w.options["nproc-per-node"] == "1"
    topology = [int(n) for n in selector["cloud.google.com/gke-tpu-topology"].split("x")]
    assert math.prod(topology) // chips == w.job["parallelism"], \
        f"topology {topology} on hosts of {chips} chips is not {w.job['parallelism']} hosts"


@pytest.mark.parametrize("where,good,bad", [(("spec",), "replicatedJobs", "replicatedJob"),
                                             (("spec", "network"), "enableDNSHostnames", "enableDnsHostnames"),
                                             (("spec", "failurePolicy"), "maxRestarts", "maxRestart"),
                                             (("metadata",), "labels", "label")])
def test_misspelled_jobset_field_fails(where, good, bad):
    doc = copy.deepcopy(by_kind(load("jobset.yaml"), "JobSet"))
    obj = doc
    for key in where:
        obj = obj[key]
    obj[bad] = obj.pop(good)
    messages = [e.message for e in jobset_validator().iter_errors(doc)]
    assert any(f"'{bad}' was unexpected" in m for m in messages), messages
    with pytest.raises(jsonschema.ValidationError):
        validate_jobset(doc)


def test_misspelled_job_field_fails():
    doc = copy.deepcopy(by_kind(load("jobset.yaml"), "JobSet"))
    spec = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
    spec["parallelsm"] = spec.pop("parallelism")
    with pytest.raises(kubernetes_validate.ValidationError, match="parallelsm"):
        validate_jobset(doc)
    doc = copy.deepcopy(by_kind(load("jobset.yaml"), "JobSet"))
    container = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMount"] = container.pop("volumeMounts")
    with pytest.raises(kubernetes_validate.ValidationError, match="volumeMount"):
        validate_jobset(doc)


def test_misspelled_core_field_fails():
    pvc = copy.deepcopy(by_kind(load("jobset.yaml"), "PersistentVolumeClaim"))
    pvc["spec"]["accessMode"] = pvc["spec"].pop("accessModes")
    with pytest.raises(kubernetes_validate.ValidationError, match="accessMode"):
        validate_core(pvc)


@pytest.mark.parametrize("break_it", ["nnodes", "endpoint", "key", "cache", "node_rank"])
def test_disagreeing_values_fail(break_it):
    docs = load("jobset.yaml")
    w = Worker(docs)
    if break_it == "nnodes":
        w.job["parallelism"] = w.job["completions"] = 3
    elif break_it == "endpoint":
        i = w.container["args"].index(next(a for a in w.container["args"] if a.startswith("--rdzv-endpoint")))
        w.container["args"][i] = "--rdzv-endpoint=torchtpu-train-workers-0-1.torchtpu-train:29500"
    elif break_it == "key":
        w.env["TORCHTPU_CACHE_KEY_FILE"]["value"] = "/shared/key"
    elif break_it == "cache":
        w.env["TORCHTPU_SHARED_CACHE_DIR"]["value"] = "/var/cache/torchtpu/shared"
    elif break_it == "node_rank":
        w.env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] = "metadata.name"
    with pytest.raises(AssertionError):
        check_semantics(docs)


def test_dockerfile():
    """The image installs the torch that pyproject.toml pins, from files that exist."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        torch_pin = re.search(r'"(torch==[^"]+)"', f.read()).group(1)
    with open(os.path.join(K8S, "Dockerfile")) as f:
        dockerfile = f.read()
    assert re.search(rf"pip install .*{re.escape(torch_pin)}\b", dockerfile), f"the Dockerfile does not pin {torch_pin}"
    assert "--no-build-isolation" in dockerfile
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert os.path.exists(os.path.join(ROOT, src)), f"COPY {src}: no such file in the checkout"
