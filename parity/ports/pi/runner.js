// Runs the yiemagent conformance scenarios on pi-agent-core and writes one normalised trace per
// scenario (trace format 2), for `python -m yiemagent.parity check`. It reads only the scenario
// files and docs/PARITY.md's rules: the behaviour vocabulary becomes pi tools and hooks, the
// scripted OpenAI replies become pi assistant messages (as pi-ai's OpenAI provider of that
// version would make them), and pi's events, model requests and hook calls become trace lines.
//
//   node runner.js --pi VERSION_FOLDER SCENARIO_DIR_OR_FILE... OUT_DIR
//   node runner.js --pi versions/1.6.0 ../../scenarios out/1.6.0
//
// VERSION_FOLDER holds a package.json naming one pi-agent-core (the @mariozechner packages up to
// 0.73.x, the @earendil-works packages from 1.x) and its node_modules; the runner loads pi from
// there. pi has no error kinds: every error_kind in the trace is null (the port's expectations
// file says so, and check then ignores kinds). Anything that goes wrong in the runner itself (a
// harness wait that gives up, an input pi refuses, an exception of the runner, a scenario field
// the runner does not know) goes to the header's "problems", which makes the trace a
// harness_error instead of evidence.

import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const WAIT_MS = Number(process.env.PARITY_WAIT_MS ?? 1500); // how long a harness wait may last
const IDLE_MS = WAIT_MS * 20; // how long the agent may stay busy after an input
const DEFAULT_SYSTEM_PROMPT = "You are a test agent.";
const DEFAULT_SESSION_ID = "parity-session";

// ----------------------------------------------------------------------------- loading pi

const PI_PACKAGES = [
  { core: "@earendil-works/pi-agent-core", ai: "@earendil-works/pi-ai" },
  { core: "@mariozechner/pi-agent-core", ai: "@mariozechner/pi-ai" },
];

function packageEntry(folder, name) {
  const dir = join(folder, "node_modules", ...name.split("/"));
  const file = join(dir, "package.json");
  if (!existsSync(file)) return null;
  const meta = JSON.parse(readFileSync(file, "utf8"));
  const dot = typeof meta.exports === "string" ? meta.exports : meta.exports?.["."];
  const entry = typeof dot === "string" ? dot : dot?.import ?? dot?.default ?? meta.module ?? meta.main ?? "index.js";
  return { version: meta.version, url: pathToFileURL(join(dir, entry)).href };
}

// pi-agent-core and pi-ai from the version folder's node_modules (pi-agent-core imports its own
// pi-ai from there too, so both share one copy).
async function loadPi(folder) {
  const wanted = JSON.parse(readFileSync(join(folder, "package.json"), "utf8")).dependencies ?? {};
  for (const names of PI_PACKAGES) {
    if (!(names.core in wanted)) continue;
    const core = packageEntry(folder, names.core);
    const ai = packageEntry(folder, names.ai);
    if (!core || !ai) throw new Error(`${names.core} is not installed in ${folder}: run npm ci there`);
    return { version: core.version, core: await import(core.url), ai: await import(ai.url) };
  }
  throw new Error(`${folder}/package.json names no pi-agent-core (${PI_PACKAGES.map((p) => p.core).join(" or ")})`);
}

// ---------------------------------------------------------------------------------- harness

class HarnessError extends Error {}

// Named latches and named points, shared by the behaviours and the inputs (docs/PARITY.md).
class Harness {
  constructor() {
    this.latches = new Map();
    this.points = new Map();
    this.problems = [];
  }

  latch(name) {
    if (!this.latches.has(name)) {
      let release;
      const promise = new Promise((done) => (release = done));
      this.latches.set(name, { promise, release });
    }
    return this.latches.get(name);
  }

  release(name) {
    this.latch(name).release();
  }

  fail(problem) {
    this.problems.push(problem);
    throw new HarnessError(problem);
  }

  async within(promise, what) {
    let timer;
    const timeout = new Promise((done) => (timer = setTimeout(() => done("timeout"), WAIT_MS)));
    const outcome = await Promise.race([promise.then(() => "done"), timeout]);
    clearTimeout(timer);
    if (outcome === "timeout") this.fail(`${what} did not happen within ${WAIT_MS} ms`);
  }

  atPoint(name, action) {
    if (!this.points.has(name)) this.points.set(name, []);
    this.points.get(name).push(action);
  }

  async reach(name) {
    const actions = this.points.get(name) ?? [];
    this.points.delete(name);
    for (const action of actions) await action();
  }

  pendingPoints() {
    return [...this.points.keys()].sort();
  }

  async runSteps(steps, signal, onUpdate) {
    for (const step of steps ?? []) {
      if (step.do === "partial") onUpdate?.({ content: [{ type: "text", text: step.text }], details: {} });
      else if (step.do === "wait") await this.within(this.latch(step.latch).promise, `the release of latch ${JSON.stringify(step.latch)}`);
      else if (step.do === "release") this.release(step.latch);
      else if (step.do === "reach") await this.reach(step.point);
      else if (step.do === "wait_abort") {
        if (!signal) this.fail("a step waits for an abort but pi gave it no abort signal");
        const aborted = new Promise((done) => {
          if (signal.aborted) return done();
          signal.addEventListener("abort", () => done(), { once: true });
        });
        await this.within(aborted, "the abort a step waits for");
      }
    }
  }
}

// ---------------------------------------------------------------- fields the runner knows

// Every scenario field the runner reads (or knowingly leaves to pi's own behaviour); anything
// else is a feature this runner does not support, reported as a problem.
const KNOWN = {
  scenario: ["$schema", "format", "name", "rule", "covers", "profile", "system_prompt", "session_id", "execution",
    "max_turns", "steering_mode", "follow_up_mode", "skip_tools_on_steer", "tools", "hooks", "history", "inputs",
    "replies", "expect", "prepare_context", "format_msg_for_llm"],
  prepare_context: ["keep_last", "append_user", "system_prompt", "hide_tools"],
  format_msg_for_llm: ["no_tools", "system_prompt"],
  tool: ["name", "description", "input_schema", "parallel", "timeout_s", "available", "prepare", "validate", "steps", "outcome"],
  outcome: ["echo", "text", "fail", "invalid_result", "details", "terminate", "register"],
  before: ["match", "steps", "block", "allow", "fail", "form"],
  after: ["match", "steps", "override", "fail", "form"],
  override: ["content", "details", "is_error", "terminate"],
  reply: ["steps", "message", "finish_reason", "form", "fail", "usage"],
  step: ["partial", "wait", "release", "reach", "wait_abort"],
  input: ["user", "follow_up", "resume", "abort", "release"],
};

function unsupported(scenario) {
  const found = [];
  const check = (what, object, where) => {
    for (const key of Object.keys(object ?? {})) if (!KNOWN[what].includes(key)) found.push(`${where}.${key}`);
  };
  const steps = (list, where) => (list ?? []).forEach((s, i) => {
    if (!KNOWN.step.includes(s.do)) found.push(`${where}[${i}].do = ${JSON.stringify(s.do)}`);
  });
  check("scenario", scenario, "$");
  check("prepare_context", scenario.prepare_context, "$.prepare_context");
  check("format_msg_for_llm", scenario.format_msg_for_llm, "$.format_msg_for_llm");
  (scenario.tools ?? []).forEach((t, i) => {
    check("tool", t, `$.tools[${i}]`);
    check("outcome", t.outcome, `$.tools[${i}].outcome`);
    steps(t.steps, `$.tools[${i}].steps`);
  });
  (scenario.hooks?.before ?? []).forEach((r, i) => { check("before", r, `$.hooks.before[${i}]`); steps(r.steps, `$.hooks.before[${i}].steps`); });
  (scenario.hooks?.after ?? []).forEach((r, i) => {
    check("after", r, `$.hooks.after[${i}]`);
    check("override", r.override, `$.hooks.after[${i}].override`);
    steps(r.steps, `$.hooks.after[${i}].steps`);
  });
  (scenario.replies ?? []).forEach((r, i) => { check("reply", r, `$.replies[${i}]`); steps(r.steps, `$.replies[${i}].steps`); });
  (scenario.inputs ?? []).forEach((input, i) => {
    if (!KNOWN.input.includes(input.do)) found.push(`$.inputs[${i}].do = ${JSON.stringify(input.do)}`);
  });
  return found.map((f) => `the runner does not support the scenario field ${f}`);
}

// ---------------------------------------------------------------------------- normalising

// Canonical JSON: keys sorted, no spaces (what echo tools return).
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
// The roles a trace knows. pi 1.x also keeps "system" messages in the transcript (the system
// prompt, and the tool changes it declares to the model); the trace format has no such role, so
// they are left out everywhere, as the system prompt is in the reference.
const TRACED_ROLES = new Set(["user", "assistant", "toolResult"]);
const traced = (m) => m && TRACED_ROLES.has(m.role);

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && b.type === "text" && typeof b.text === "string").map((b) => b.text).join("\n");
}

function usageOf(usage) {
  if (!isObject(usage)) return null;
  const counts = { input: usage.input, output: usage.output, cache_read: usage.cacheRead, cache_write: usage.cacheWrite };
  for (const k of Object.keys(counts)) counts[k] = Number.isInteger(counts[k]) ? counts[k] : 0;
  return Object.values(counts).some((n) => n !== 0) ? counts : null;
}

// docs/PARITY.md "Normalising a trace": ids the scenario did not give become <id:N>, timestamps
// go, error messages become "<message>", non-object arguments "<unusable>"; pi has no error
// kinds, so every error_kind is null.
class Normaliser {
  constructor(knownIds) {
    this.known = knownIds;
    this.ids = new Map();
    this.run = 0;
    this.turn = 0;
  }

  get where() {
    return { run: Math.max(this.run, 1), turn: this.turn };
  }

  callId(raw) {
    const id = String(raw ?? "");
    if (this.known.has(id)) return id;
    if (!this.ids.has(id)) this.ids.set(id, `<id:${this.ids.size + 1}>`);
    return this.ids.get(id);
  }

  args(raw) {
    return isObject(raw) ? raw : "<unusable>";
  }

  details(raw) {
    const out = isObject(raw) ? { ...raw } : {};
    delete out.error_kind;
    return out;
  }

  calls(m) {
    return (Array.isArray(m.content) ? m.content : []).filter((b) => b && b.type === "toolCall")
      .map((b) => ({ id: this.callId(b.id), name: String(b.name ?? ""), arguments: this.args(b.arguments) }));
  }

  message(m) {
    if (m.role === "user") return { role: "user", text: textOf(m.content) };
    if (m.role === "assistant") {
      const out = {
        role: "assistant", text: textOf(m.content), tool_calls: this.calls(m), stop_reason: String(m.stopReason),
        error_message: m.errorMessage == null ? null : "<message>",
      };
      const usage = usageOf(m.usage);
      if (usage) out.usage = usage;
      return out;
    }
    return {
      role: "toolResult", tool_call_id: this.callId(m.toolCallId), tool_name: String(m.toolName ?? ""),
      is_error: Boolean(m.isError), error_kind: null, text: textOf(m.content), details: this.details(m.details),
      // Neither pi version carries added tool names on a result; a version that did would be read here.
      added_tool_names: Array.isArray(m.addedToolNames) ? m.addedToolNames.map(String) : [],
    };
  }

  // What the stream function (the model) received: pi 0.x passes systemPrompt and tools in the
  // context; pi 1.x passes only messages, whose system messages carry the prompt and the tools
  // (pi-ai's getCurrentSystemPrompt / getCurrentTools replay them).
  request(context, options, ai) {
    const messages = Array.isArray(context?.messages) ? context.messages : [];
    const system = typeof context?.systemPrompt === "string" ? context.systemPrompt
      : ai.getCurrentSystemPrompt ? ai.getCurrentSystemPrompt(messages) : "";
    const tools = Array.isArray(context?.tools) ? context.tools : ai.getCurrentTools ? ai.getCurrentTools(messages) : [];
    return {
      type: "llm_request", ...this.where, system_prompt: String(system ?? ""),
      messages: messages.filter(traced).map((m) => {
        if (m.role === "user") return { role: "user", text: textOf(m.content) };
        if (m.role === "assistant") return { role: "assistant", text: textOf(m.content), tool_calls: this.calls(m) };
        return { role: "toolResult", tool_call_id: this.callId(m.toolCallId), text: textOf(m.content), is_error: Boolean(m.isError), error_kind: null };
      }),
      tools: tools.map((t) => ({
        name: String(t.name), description: String(t.description ?? ""),
        input_schema: isObject(t.parameters) ? JSON.parse(JSON.stringify(t.parameters)) : {},
      })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
      session_id: options?.sessionId == null ? null : String(options.sessionId),
    };
  }

  hook(kind, ctx) {
    const out = {
      type: "hook", ...this.where, hook: kind, tool_call_id: this.callId(ctx.toolCall?.id),
      tool_name: String(ctx.toolCall?.name ?? ""), arguments: this.args(ctx.args),
      history: (ctx.context?.messages ?? []).filter(traced).map((m) => m.role),
    };
    if (kind === "after") Object.assign(out, { is_error: Boolean(ctx.isError), error_kind: null, text: textOf(ctx.result?.content) });
    return out;
  }

  event(e) {
    if (e.type === "message_update") return null;
    if ((e.type === "message_start" || e.type === "message_end") && e.message && !traced(e.message)) return null;
    if (e.type === "agent_start") { this.run += 1; this.turn = 0; }
    if (e.type === "turn_start") this.turn += 1;
    const out = { type: e.type, ...this.where };
    switch (e.type) {
      case "agent_end": out.messages = (e.messages ?? []).filter(traced).length; break;
      case "turn_end":
        out.stop_reason = String(e.message?.stopReason);
        out.tool_results = (e.toolResults ?? []).map((m) => this.callId(m.toolCallId));
        break;
      case "message_start": out.role = e.message?.role ?? "assistant"; break;
      case "message_end": out.message = this.message(e.message); break;
      case "tool_execution_start":
        Object.assign(out, { tool_call_id: this.callId(e.toolCallId), tool_name: String(e.toolName), arguments: this.args(e.args) });
        break;
      case "tool_execution_update":
        Object.assign(out, { tool_call_id: this.callId(e.toolCallId), tool_name: String(e.toolName), text: textOf(e.partialResult?.content) });
        break;
      case "tool_execution_end":
        Object.assign(out, {
          tool_call_id: this.callId(e.toolCallId), tool_name: String(e.toolName), is_error: Boolean(e.isError),
          error_kind: null, text: textOf(e.result?.content), details: this.details(e.result?.details),
          terminate: e.result?.terminate === true,
        });
        break;
      default: break;
    }
    return out;
  }
}

// ------------------------------------------------------------------------------ behaviours

const ZERO_COST = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };

function piUsage(usage) {
  const u = { input: usage?.input ?? 0, output: usage?.output ?? 0, cacheRead: usage?.cache_read ?? 0, cacheWrite: usage?.cache_write ?? 0 };
  return { ...u, totalTokens: u.input + u.output + u.cacheRead + u.cacheWrite, cost: { ...ZERO_COST } };
}

function assistant(content, stopReason, errorMessage, usage) {
  return { role: "assistant", content, api: "openai-completions", provider: "parity", model: "scripted",
    usage: piUsage(usage), stopReason, ...(errorMessage !== undefined ? { errorMessage } : {}), timestamp: Date.now() };
}

// A tool call's arguments as the version's openai-completions provider leaves them once the
// call is complete: pi-ai 1.x parses the whole text once (parseToolCallArguments: {} and an
// argumentsError for text that is not a JSON object), 0.x parses it leniently (parseStreamingJson).
function argumentsOf(ai, text) {
  if (ai.parseToolCallArguments) return ai.parseToolCallArguments(text);
  return { arguments: ai.parseStreamingJson(text) };
}

// A scripted OpenAI reply as pi-ai's openai-completions provider turns it into a message: text,
// then toolCall blocks whose id stays empty when the reply has none. pi reads one tool-call
// form only, so `form` is ignored. The finish reasons map as pi-ai maps them; content_filter
// makes the provider fail with stopReason "error".
function piReply(ai, reply) {
  const m = reply.message;
  const content = [];
  if (m.content) content.push({ type: "text", text: m.content });
  for (const c of m.tool_calls ?? []) {
    content.push({ type: "toolCall", id: c.id || "", name: c.function.name, ...argumentsOf(ai, c.function.arguments) });
  }
  const finish = reply.finish_reason ?? ((m.tool_calls ?? []).length ? "tool_calls" : "stop");
  const stop = { stop: "stop", length: "length", tool_calls: "toolUse", content_filter: "error" }[finish] ?? "stop";
  return assistant(content, stop, stop === "error" ? `Provider finish_reason: ${finish}` : undefined, reply.usage);
}

class Aborted extends Error {}

// pi's StreamFn contract: never throw; a failure is an "error" event carrying a message whose
// stopReason is "error" or "aborted". Each call is recorded as an llm_request line first.
function scriptedStream(replies, harness, ai, record) {
  let calls = 0;
  return (_model, context, options) => {
    record(context, options);
    const stream = ai.createAssistantMessageEventStream();
    const index = calls++;
    (async () => {
      let message;
      try {
        // Like a real provider, an aborted call gives up before anything else.
        if (options?.signal?.aborted) throw new Aborted();
        if (index >= replies.length) throw new Error(`the script has no reply for model call ${index + 1}`);
        const reply = replies[index];
        await harness.runSteps(reply.steps, options?.signal);
        if (options?.signal?.aborted) throw new Aborted();
        message = reply.fail !== undefined ? assistant([], "error", reply.fail) : piReply(ai, reply);
      } catch (error) {
        message = error instanceof Aborted ? assistant([], "aborted", "the model call was aborted")
          : assistant([], "error", String(error?.message ?? error));
      }
      if (message.stopReason === "error" || message.stopReason === "aborted") {
        stream.push({ type: "error", reason: message.stopReason, error: message });
      } else {
        stream.push({ type: "done", reason: message.stopReason, message });
      }
    })();
    return stream;
  };
}

// ---------------------------------------------------------------------------- context hooks

// The vocabulary's prepare_context and format_msg_for_llm (docs/PARITY.md "Context hooks") as
// pi's own hooks: prepare_context becomes transformContext (the transcript before each model
// call; what it returns is sent, never stored), format_msg_for_llm becomes convertToLlm (that
// transcript -> the messages the model gets). pi 1.x carries the system prompt and the tools in
// the transcript's system messages, so both hooks can change them there. pi 0.x hands
// state.systemPrompt and state.tools to the model beside the messages, outside what either hook
// sees or returns: there the system_prompt, hide_tools and no_tools parts have nothing to act
// on, the requests show what pi sends, and the port's expectations declare the difference.
const isSystem = (m) => m?.role === "system";

// Only the last n messages of the conversation; pi 1.x's system messages (the prompt, the tool
// declarations) are not conversation and stay.
function keepLast(messages, n) {
  const others = messages.filter((m) => !isSystem(m));
  const kept = new Set(n > 0 ? others.slice(-n) : []);
  return messages.filter((m) => isSystem(m) || kept.has(m));
}

// pi-ai 1.x's current prompt joins the content (and sections) of every system message: `prompt`
// goes on the first, the later ones keep only their tool changes.
function withPrompt(messages, prompt) {
  let first = true;
  const out = messages.map((m) => {
    if (!isSystem(m)) return m;
    const { sections: _sections, ...rest } = m;
    const content = first ? prompt : "";
    first = false;
    return { ...rest, content };
  });
  return first ? [{ role: "system", content: prompt, timestamp: 0 }, ...out] : out;
}

// The system messages without the declarations of the tools named in `names` (all when null).
function withoutTools(messages, names) {
  return messages.map((m) => {
    if (!isSystem(m) || !Array.isArray(m.toolsAdded)) return m;
    const { toolsAdded, ...rest } = m;
    const left = names === null ? [] : toolsAdded.filter((t) => !names.has(t.name));
    return left.length ? { ...rest, toolsAdded: left } : rest;
  });
}

function contextHooks(scenario, inTranscript) {
  const hooks = {};
  const prepare = scenario.prepare_context;
  if (prepare) {
    hooks.transformContext = async (messages) => {
      let out = messages.slice();
      if (prepare.keep_last !== undefined) out = keepLast(out, prepare.keep_last);
      if (prepare.append_user !== undefined) {
        out.push({ role: "user", content: [{ type: "text", text: prepare.append_user }], timestamp: 0 });
      }
      if (inTranscript && prepare.system_prompt !== undefined) out = withPrompt(out, prepare.system_prompt);
      if (inTranscript && prepare.hide_tools) out = withoutTools(out, new Set(prepare.hide_tools));
      return out;
    };
  }
  const format = scenario.format_msg_for_llm;
  if (format && inTranscript) {
    // pi 1.x's default convertToLlm keeps the system, user, assistant and toolResult messages.
    hooks.convertToLlm = (messages) => {
      let out = messages.filter((m) => isSystem(m) || traced(m));
      if (format.no_tools) out = withoutTools(out, null);
      if (format.system_prompt !== undefined) out = withPrompt(out, format.system_prompt);
      return out;
    };
  }
  return hooks;
}

function firstRule(rules, toolCall) {
  return (rules ?? []).find((r) => (r.match?.tool ?? toolCall.name) === toolCall.name
    && (r.match?.tool_call_id ?? toolCall.id) === toolCall.id);
}

// ---------------------------------------------------------------------------- one scenario

function knownIds(scenario) {
  const ids = new Set();
  for (const r of scenario.replies ?? []) for (const c of r.message?.tool_calls ?? []) if (c.id) ids.add(c.id);
  for (const m of scenario.history ?? []) {
    for (const c of m.tool_calls ?? []) ids.add(c.id);
    if (m.role === "toolResult") ids.add(m.tool_call_id);
  }
  return ids;
}

// A scenario history message (normalised form) as a pi message. pi results have no error kind
// and no added tool names, so those are not carried over.
function historyMessage(m) {
  const text = m.text ? [{ type: "text", text: m.text }] : [];
  if (m.role === "user") return { role: "user", content: text, timestamp: 0 };
  if (m.role === "assistant") {
    const calls = (m.tool_calls ?? []).map((c) => ({ type: "toolCall", id: c.id, name: c.name, arguments: c.arguments }));
    return { ...assistant([...text, ...calls], m.stop_reason, m.error_message ?? undefined, m.usage), timestamp: 0 };
  }
  return { role: "toolResult", toolCallId: m.tool_call_id, toolName: m.tool_name, content: text,
    details: { ...(m.details ?? {}) }, isError: Boolean(m.is_error), timestamp: 0 };
}

function matches(point, event) {
  return Object.entries(point).every(([key, value]) => key === "nth"
    || (key === "role" && event.role === undefined ? event.message?.role === value : event[key] === value));
}

function bounded(promise, ms) {
  let timer;
  const timeout = new Promise((done) => (timer = setTimeout(() => done(false), ms)));
  return Promise.race([promise.then(() => true), timeout]).finally(() => clearTimeout(timer));
}

// Runs `scenario` and fills `state`: lines (events, llm_request and hook lines, in the order they
// happened), responses, history and problems. If the runner raises, what `state` holds so far
// is still written, with the exception among the problems.
async function runScenario(pi, scenario, state) {
  const harness = new Harness();
  harness.problems = state.problems;
  const { problems, lines, responses } = state;
  problems.push(...unsupported(scenario));
  const normaliser = new Normaliser(knownIds(scenario));
  let agent;

  const later = new Map();
  const initial = [];
  for (const spec of scenario.tools ?? []) {
    const outcome = spec.outcome ?? {};
    const tool = {
      name: spec.name, label: spec.name, description: spec.description ?? "",
      parameters: spec.input_schema ?? { type: "object" },
      executionMode: spec.parallel ? "parallel" : "sequential",
      execute: async (_toolCallId, params, signal, onUpdate) => {
        await harness.runSteps(spec.steps, signal, onUpdate);
        if (outcome.fail !== undefined) throw new Error(outcome.fail);
        if (outcome.invalid_result) return "not a tool result";
        const details = { ...(outcome.details ?? {}) };
        if (outcome.register) {
          agent.state.tools = [...agent.state.tools, ...outcome.register.map((n) => later.get(n)).filter(Boolean)];
          details.addedToolNames = [...outcome.register];
        }
        const text = outcome.echo ? canonical(params) : outcome.text;
        return { content: [{ type: "text", text }], details, terminate: outcome.terminate === true };
      },
    };
    if (spec.prepare) {
      tool.prepareArguments = (args) => {
        if (spec.prepare.fail !== undefined) throw new Error(spec.prepare.fail);
        return { ...spec.prepare.defaults, ...args };
      };
    }
    // pi has no custom validator (spec.validate) and no per-call timeout (spec.timeout_s): the
    // tool gets pi's own schema check and no time limit.
    if (spec.available === false) later.set(spec.name, tool);
    else initial.push(tool);
  }

  const hooks = scenario.hooks ?? {};
  const options = {
    initialState: {
      systemPrompt: scenario.system_prompt ?? DEFAULT_SYSTEM_PROMPT,
      tools: initial,
      messages: (scenario.history ?? []).map(historyMessage),
    },
    sessionId: scenario.session_id ?? DEFAULT_SESSION_ID,
    streamFn: scriptedStream(scenario.replies ?? [], harness, pi.ai,
      (context, opts) => lines.push(normaliser.request(context, opts, pi.ai))),
    toolExecution: scenario.execution ?? "sequential",
    steeringMode: scenario.steering_mode ?? "all",
    followUpMode: scenario.follow_up_mode ?? "one-at-a-time",
    // pi 1.x keeps the prompt and the tools in the transcript (pi-ai has getCurrentTools).
    ...contextHooks(scenario, typeof pi.ai.getCurrentTools === "function"),
    // Both hooks are always installed, so every call of either is recorded; without a matching
    // rule a hook returns nothing, which changes nothing.
    beforeToolCall: async (ctx, signal) => {
      lines.push(normaliser.hook("before", ctx));
      const rule = firstRule(hooks.before, ctx.toolCall);
      if (!rule) return undefined;
      await harness.runSteps(rule.steps, signal);
      if (rule.fail !== undefined) throw new Error(rule.fail);
      if (rule.block !== undefined) return typeof rule.block === "string" ? { block: true, reason: rule.block } : { block: true };
      return rule.allow ? { block: false } : undefined;
    },
    afterToolCall: async (ctx, signal) => {
      lines.push(normaliser.hook("after", ctx));
      const rule = firstRule(hooks.after, ctx.toolCall);
      if (!rule) return undefined;
      await harness.runSteps(rule.steps, signal);
      if (rule.fail !== undefined) throw new Error(rule.fail);
      const o = rule.override;
      if (!o) return undefined;
      return {
        ...(o.content !== undefined ? { content: [{ type: "text", text: o.content }] } : {}),
        ...(o.details !== undefined ? { details: o.details } : {}),
        ...(o.is_error !== undefined ? { isError: o.is_error } : {}),
        ...(o.terminate !== undefined ? { terminate: o.terminate } : {}),
      };
    },
  };
  // pi has no max_turns and no skip_tools_on_steer: those settings reach nothing.
  agent = new pi.core.Agent(options);
  // pi 0.x reads the session id from the options too; set it on the agent as well, as both
  // versions forward agent.sessionId to the stream function.
  agent.sessionId = options.sessionId;

  // Inputs with "at" fire where their point is reached: event points inside the listener
  // (pi awaits listeners, so before the loop goes on), named points inside the step.
  const perform = async (input) => {
    const message = { role: "user", content: [{ type: "text", text: input.text }], timestamp: Date.now() };
    if (input.do === "user") {
      if (agent.signal) agent.steer(message); else await agent.prompt(message);
    } else if (input.do === "follow_up") {
      if (agent.signal) agent.followUp(message); else await agent.prompt(message);
    } else if (input.do === "resume") await agent.continue();
    else if (input.do === "abort") agent.abort();
    else if (input.do === "release") harness.release(input.latch);
  };
  // An input fired from inside pi (a listener, a step) must not throw into pi: a refusal is the
  // runner's problem, not the agent's behaviour.
  const fire = async (input) => {
    try {
      await perform(input);
    } catch (error) {
      problems.push(`input ${JSON.stringify(input)} was refused: ${error?.message ?? error}`);
    }
  };
  const triggers = [];
  for (const input of scenario.inputs ?? []) {
    if (typeof input.at === "string") harness.atPoint(input.at, () => fire(input));
    else if (input.at) triggers.push({ point: input.at, left: input.at.nth ?? 1, input });
  }

  agent.subscribe(async (event) => {
    const normal = normaliser.event(event);
    if (normal === null) return;
    lines.push(normal);
    if (event.type === "agent_end") {
      const last = [...(event.messages ?? [])].reverse().find((m) => m.role === "assistant");
      if (last) responses.push(normaliser.message(last));
    }
    for (const trigger of [...triggers]) {
      if (matches(trigger.point, normal) && --trigger.left === 0) {
        triggers.splice(triggers.indexOf(trigger), 1);
        await fire(trigger.input);
      }
    }
  });

  for (const input of scenario.inputs ?? []) {
    if (input.at !== undefined) continue;
    const sent = perform(input).catch((error) => {
      problems.push(`input ${JSON.stringify(input)} was refused: ${error?.message ?? error}`);
    });
    if (!(await bounded(sent.then(() => agent.waitForIdle()), IDLE_MS))) {
      problems.push(`the agent was still busy ${IDLE_MS} ms after input ${JSON.stringify(input)}`);
      agent.abort();
      await bounded(agent.waitForIdle(), WAIT_MS);
      break;
    }
  }
  problems.push(...harness.pendingPoints().map((p) => `no step reached point ${JSON.stringify(p)}`));
  problems.push(...triggers.map((t) => `no event matched ${JSON.stringify({ ...t.point, nth: t.left })}`));
  state.history = agent.state.messages.filter(traced).map((m) => normaliser.message(m));
}

// -------------------------------------------------------------------------------------- main

function scenarioFiles(paths) {
  const files = [];
  for (const path of paths) {
    if (statSync(path).isDirectory()) {
      files.push(...readdirSync(path).filter((f) => f.endsWith(".json")).sort().map((f) => join(path, f)));
    } else files.push(path);
  }
  return files;
}

// The suite's version: the VERSION file of the scenario's folder.
function suiteOf(file) {
  const path = join(dirname(file), "VERSION");
  return existsSync(path) ? readFileSync(path, "utf8").trim() : null;
}

function parseArgs(argv) {
  const rest = [];
  let piFolder = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--pi") piFolder = argv[++i];
    else if (argv[i].startsWith("--pi=")) piFolder = argv[i].slice(5);
    else rest.push(argv[i]);
  }
  return { piFolder, paths: rest.slice(0, -1), out: rest[rest.length - 1] };
}

async function main(argv) {
  const { piFolder, paths, out } = parseArgs(argv);
  if (!piFolder || paths.length < 1) {
    console.error("usage: node runner.js --pi VERSION_FOLDER SCENARIO_DIR_OR_FILE... OUT_DIR");
    return 2;
  }
  const pi = await loadPi(resolve(piFolder));
  const implementation = `pi ${pi.version}`;
  mkdirSync(out, { recursive: true });
  let troubled = 0;
  for (const file of scenarioFiles(paths)) {
    let scenario = null;
    const result = { lines: [], responses: [], history: [], problems: [] };
    try {
      scenario = JSON.parse(readFileSync(file, "utf8"));
      await runScenario(pi, scenario, result);
    } catch (error) {
      result.problems.push(`the runner raised ${error?.stack ?? error}`);
    }
    const suite = suiteOf(file);
    if (suite === null) result.problems.push(`no VERSION file next to ${file}`);
    const name = typeof scenario?.name === "string" && scenario.name ? scenario.name : basename(file, ".json");
    const header = { type: "trace", format: 2, suite: suite ?? "0.0.0", scenario: name, implementation };
    if (result.problems.length) header.problems = [...result.problems];
    const lines = [header, ...result.lines,
      ...result.responses.map((message) => ({ type: "response", message })),
      ...result.history.map((message) => ({ type: "history", message }))];
    writeFileSync(join(out, `${basename(file, ".json")}.jsonl`), lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    if (result.problems.length) troubled += 1;
    const note = result.problems.length ? ` (harness: ${result.problems.join("; ")})` : "";
    console.log(`traced ${name}${note}`);
  }
  console.log(`${implementation}: ${troubled} trace(s) with harness problems`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
