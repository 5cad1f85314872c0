#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<target>/seed-*) from examples/ and a few
hand-picked inputs. Rerun after changing examples: `python3 fuzz/seeds.py`."""
import copy, glob, json, os, shutil, struct
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

docs = []
for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml"))):
    for doc in yaml.safe_load_all(open(path)):
        if doc:
            docs.append(doc)

def of_kind(*kinds):
    return [d for d in docs if d.get("kind") in kinds]

def review(obj, op="CREATE", old=None):
    api = obj.get("apiVersion", "v1")
    group, _, version = api.rpartition("/")
    kind = obj.get("kind", "")
    req = {"uid": "00000000-0000-0000-0000-000000000001",
           "kind": {"group": group, "version": version, "kind": kind},
           "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
           "name": obj.get("metadata", {}).get("name", ""),
           "namespace": obj.get("metadata", {}).get("namespace", "default"),
           "operation": op, "userInfo": {"username": "fuzz"}}
    if op != "DELETE":
        req["object"] = obj
    if old is not None:
        req["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}

def bump_images(obj):
    new = copy.deepcopy(obj)
    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "image" and isinstance(x, str):
                    v[k] = x + "-next"
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(new)
    return new

def write(target, items):
    d = os.path.join(CORPUS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for i, item in enumerate(items):
        data = item if isinstance(item, bytes) else (
            item.encode() if isinstance(item, str) else json.dumps(item, separators=(",", ":")).encode())
        open(os.path.join(d, "seed-%02d" % i), "wb").write(data)

def webhook_seeds(*kinds):
    out = []
    for obj in of_kind(*kinds):
        out += [review(obj), review(bump_images(obj), "UPDATE", obj)]
    return out

write("cloneset_webhook", webhook_seeds("CloneSet"))
write("statefulset_webhook", webhook_seeds("StatefulSet"))
write("daemonset_webhook", webhook_seeds("DaemonSet"))
write("broadcastjob_webhook", webhook_seeds("BroadcastJob"))
write("cronjob_webhook", webhook_seeds("AdvancedCronJob"))
write("sidecarset_webhook", webhook_seeds("SidecarSet"))

sidecarsets = of_kind("SidecarSet")
pods = of_kind("Pod")
inject = []
for pod in pods:
    labelled = copy.deepcopy(pod)
    labelled.setdefault("metadata", {}).setdefault("labels", {}).update({"app": "nginx", "app.kubernetes.io/name": "nginx"})
    inject.append({"sidecarsets": sidecarsets, "namespaces": {"default": {}}, "review": review(labelled)})
sized = {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "sized"},
         "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                  "containers": [{"name": "proxy", "image": "envoy", "resourcesPolicy": {
                      "targetContainerMode": "sum", "targetContainersNameRegex": "^.*$",
                      "resourceExpr": {"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"},
                                       "requests": {"cpu": "cpu*50%"}}}}]}}
if pods:
    p = copy.deepcopy(pods[0])
    p.setdefault("metadata", {})["labels"] = {"app": "nginx"}
    inject.append({"sidecarsets": [sized], "namespaces": {}, "review": review(p)})
write("sidecarset_inject", inject)

protection = []
for obj in of_kind("CloneSet", "StatefulSet", "DaemonSet", "Deployment"):
    for value in ["Always", "Cascading"]:
        o = copy.deepcopy(obj)
        o.setdefault("metadata", {}).setdefault("labels", {})["policy.kruise.io/delete-protection"] = value
        protection.append(review(o, "DELETE", o))
ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p", "labels": {"policy.kruise.io/delete-protection": "Cascading"}}, "x-fuzz-count": 2}
protection.append(review(ns, "DELETE", ns))
crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com", "labels": {"policy.kruise.io/delete-protection": "Cascading"}},
       "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": True, "storage": True}]}}
protection.append(review(crd, "DELETE", crd))
write("protection_webhook", protection)

write("intstr_percent", [struct.pack("<i", n) + s.encode() for n, s in
      [(10, "20%"), (8, "90%"), (7, "12.5%"), (5, "3"), (0, "0%"), (-3, "-50%"), (100, "1e2%")]])

write("resources_policy", ["max(cpu*50%, 50m)\n1", "cpu*50%\n600m", "min(max(max(max(0.5,0.5*cpu),cpu-1.0),cpu-1.0),3.0)\n2",
      "(1 + 2) * 3\n1Gi", "memory / 2\n200Mi", "-cpu + 2\n250m", "min(3, 1, 2)\n1e3"])

selector_seeds = []
for obj in docs:
    spec = obj.get("spec", {}) if isinstance(obj.get("spec"), dict) else {}
    if isinstance(spec.get("selector"), dict):
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {}) if isinstance(spec.get("template"), dict) else {}
        selector_seeds.append({"selector": spec["selector"], "labels": labels, "sidecarsets": sidecarsets[:2]})
write("selector_condition", selector_seeds[:12])

schedules = []
for obj in of_kind("AdvancedCronJob"):
    s = obj["spec"]["schedule"]
    schedules.append(s + ("\n" + obj["spec"]["timeZone"] if obj["spec"].get("timeZone") else ""))
schedules += ["0 0 * * *\nAsia/Shanghai", "CRON_TZ=Europe/Berlin 30 2 * * 1-5", "@hourly", "@every 1h30m",
              "0/10 * * * *", "TZ=UTC 0 0 29 2 *", "*/5 9-17 * * MON-FRI\nAmerica/New_York"]
write("cron_schedule", schedules)

templates = []
for obj in docs:
    spec = obj.get("spec", {}) if isinstance(obj.get("spec"), dict) else {}
    if isinstance(spec.get("template"), dict):
        templates.append(spec["template"])
write("revision_hash", templates[:12])
