// Checks deploy/kubernetes/splitdec.yaml offline:
//   node check_k8s_manifest.mjs MANIFEST HAPROXY_TEMPLATE [HAPROXY_BIN]
// - every document validates against the Kubernetes API's schema
//   (kubernetes-models, generated from Kubernetes' OpenAPI spec);
// - it says what the HAProxy recipe says: replicas probed on /ready
//   (readiness) and /health (liveness), drained by a preStop pause and
//   SIGTERM within the grace period; every Service selects a Deployment's
//   pods and names a port they have; the router's haproxy.cfg holds the
//   template's routing lines word for word, in order, finds the replicas
//   through the headless Service, and `haproxy -c` accepts it.
// Prints one JSON line; exits 1 with "FAIL: ..." otherwise.
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { Service } from "kubernetes-models/v1/Service";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";

const [manifestPath, templatePath, haproxyBin] = process.argv.slice(2);
const fail = (why) => {
  console.error("FAIL: " + why);
  process.exit(1);
};
const check = (cond, why) => cond || fail(why);

const models = { "apps/v1/Deployment": Deployment, "v1/Service": Service, "v1/ConfigMap": ConfigMap };
const docs = parseAllDocuments(readFileSync(manifestPath, "utf8"));
const objects = [];
for (const doc of docs) {
  if (doc.errors.length) fail(`YAML: ${doc.errors[0].message}`);
  const o = doc.toJS();
  if (o === null) continue;
  const Model = models[`${o.apiVersion}/${o.kind}`];
  check(Model, `${o.apiVersion} ${o.kind} is not one this check knows`);
  try {
    new Model(o).validate();
  } catch (e) {
    fail(`${o.kind} ${o.metadata?.name}: ${e.message}`);
  }
  objects.push(o);
}
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name) ?? fail(`no ${kind} ${name}`);
const subset = (small, big) => Object.entries(small ?? {}).every(([k, v]) => big?.[k] === v);

// Deployments: selectors match their pods; probes name real ports.
const deployments = objects.filter((o) => o.kind === "Deployment");
for (const d of deployments) {
  const pod = d.spec.template;
  check(subset(d.spec.selector.matchLabels, pod.metadata.labels), `Deployment ${d.metadata.name}: selector does not match its pods`);
  for (const c of pod.spec.containers) {
    const ports = c.ports ?? [];
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const p = c[probe]?.httpGet?.port;
      if (p !== undefined)
        check(ports.some((q) => q.name === p || q.containerPort === p), `${d.metadata.name}/${c.name}: ${probe} port ${p} is not a container port`);
    }
  }
}

// The replicas.
const replicas = find("Deployment", "splitdec");
check(replicas.spec.replicas >= 2, "the splitdec Deployment runs fewer than 2 replicas");
const [server] = replicas.spec.template.spec.containers;
const args = server.args ?? [];
const flag = (f) => (args.indexOf(f) >= 0 ? args[args.indexOf(f) + 1] : undefined);
check(args[0] === "serve", "the replica's args do not start with serve");
check(flag("--host") === "0.0.0.0", "the replica must listen on --host 0.0.0.0 (the default is 127.0.0.1)");
const port = Number(flag("--port") ?? 8080);
check(server.ports.some((p) => p.containerPort === port), `no container port ${port} (--port)`);
check(server.readinessProbe?.httpGet?.path === "/ready", "readiness probe is not GET /ready");
check(server.livenessProbe?.httpGet?.path === "/health", "liveness probe is not GET /health");
check(server.startupProbe?.httpGet, "no startup probe: liveness would kill a replica still loading its model");
const stop = server.lifecycle?.preStop;
check(stop, "no preStop: SIGTERM would race the endpoints' update");
const pause = Number(stop.sleep?.seconds ?? (stop.exec?.command?.[0] === "sleep" ? stop.exec.command[1] : NaN));
check(pause > 0, "preStop is not a pause");
check(replicas.spec.template.spec.terminationGracePeriodSeconds >= pause + 60,
      "terminationGracePeriodSeconds leaves a drain less than a minute");

// Services select a Deployment's pods and name a port they have.
for (const s of objects.filter((o) => o.kind === "Service")) {
  const d = deployments.find((x) => subset(s.spec.selector, x.spec.template.metadata.labels) && Object.keys(s.spec.selector ?? {}).length);
  check(d, `Service ${s.metadata.name} selects no Deployment's pods`);
  const ports = d.spec.template.spec.containers.flatMap((c) => c.ports ?? []);
  for (const p of s.spec.ports)
    check(ports.some((q) => q.name === p.targetPort || q.containerPort === p.targetPort),
          `Service ${s.metadata.name}: targetPort ${p.targetPort} is not a port of ${d.metadata.name}`);
}
const headless = find("Service", "splitdec-replicas");
check(headless.spec.clusterIP === "None", "splitdec-replicas must be headless (clusterIP: None): HAProxy resolves every replica");
check(subset(headless.spec.selector, replicas.spec.template.metadata.labels), "splitdec-replicas does not select the replicas");
const front = find("Service", "splitdec");
const router = find("Deployment", "splitdec-router");
check(subset(front.spec.selector, router.spec.template.metadata.labels), "the splitdec Service does not select the router");

// The router's config: the template's routing lines, word for word.
const cm = find("ConfigMap", "splitdec-router");
check(router.spec.template.spec.volumes?.some((v) => v.configMap?.name === "splitdec-router"), "the router does not mount its ConfigMap");
const cfg = cm.data["haproxy.cfg"] ?? fail("the ConfigMap has no haproxy.cfg");
const routingLines = (text) => {
  const out = [];
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    if (!raw.startsWith(" ")) { section = line; continue; }
    if (!/^(frontend splitdec_front|backend splitdec)$/.test(section)) continue;
    if (/^(bind|server|server-template|default-server|@SERVERS@)\b/.test(line)) continue;
    out.push(line);
  }
  return out;
};
const want = routingLines(readFileSync(templatePath, "utf8"));
const have = routingLines(cfg);
check(want.length >= 10, "the template's routing lines were not found");
check(JSON.stringify(want) === JSON.stringify(have),
      `the router's config differs from the template: ${JSON.stringify(want.filter((l, i) => have[i] !== l)[0] ?? have[want.length])}`);
const template = cfg.match(/^\s*server-template\s+\S+\s+\d+\s+([^:\s]+):(\d+)\s.*resolvers/m) ?? fail("no server-template ... resolvers line");
check(template[1].startsWith("splitdec-replicas."), `server-template resolves ${template[1]}, not the headless Service`);
check(headless.spec.ports.some((p) => p.port === Number(template[2])), `server-template port ${template[2]} is not the headless Service's`);
check(/option httpchk GET \/ready/.test(cfg), "the router does not check /ready");

let haproxyChecked = false;
if (haproxyBin) {
  const dir = mkdtempSync(join(tmpdir(), "k8s-haproxy-"));
  try {
    writeFileSync(join(dir, "haproxy.cfg"), cfg);
    execFileSync(haproxyBin, ["-c", "-q", "-f", join(dir, "haproxy.cfg")], { stdio: ["ignore", "pipe", "pipe"], timeout: 20000 });
    haproxyChecked = true;
  } catch (e) {
    fail(`haproxy -c refuses the router's config: ${e.stderr?.toString() ?? e.message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log(JSON.stringify({ objects: objects.map((o) => `${o.kind}/${o.metadata.name}`), routing_lines: want.length, haproxy_checked: haproxyChecked }));
