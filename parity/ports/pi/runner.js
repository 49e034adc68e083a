// Runs the yiemagent conformance scenarios on pi-agent-core and writes one normalised trace per
// scenario, for `python -m yiemagent.parity check`. It reads only the scenario files and
// docs/PARITY.md's rules: the behaviour vocabulary becomes pi tools and hooks, the scripted
// OpenAI replies become pi assistant messages (as pi-ai's OpenAI provider would make them), and
// pi's events become trace lines.
//
//   node runner.js SCENARIO_DIR_OR_FILE... OUT_DIR
//
// pi has no error kinds, so the runner derives them from what it saw happen to each call (which
// wrapper threw, whether the before hook was reached), the way docs/PARITY.md describes for an
// implementation whose error results carry no kind.

import { readFileSync, readdirSync, statSync, mkdirSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { createRequire } from "node:module";
import { Agent } from "@mariozechner/pi-agent-core";
import { createAssistantMessageEventStream, parseStreamingJson } from "@mariozechner/pi-ai";

const require = createRequire(import.meta.url);
const PI_VERSION = require("@mariozechner/pi-agent-core/package.json").version;
const IMPLEMENTATION = `pi ${PI_VERSION}`;
const WAIT_MS = Number(process.env.PARITY_WAIT_MS ?? 1500); // how long a harness wait may last

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
      const promise = new Promise((resolve) => (release = resolve));
      this.latches.set(name, { promise, release, released: false });
    }
    return this.latches.get(name);
  }

  release(name) {
    const latch = this.latch(name);
    latch.released = true;
    latch.release();
  }

  fail(problem) {
    this.problems.push(problem);
    throw new HarnessError(problem);
  }

  async within(promise, what) {
    let timer;
    const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), WAIT_MS)));
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

  async runSteps(steps, signal, onUpdate) {
    for (const step of steps ?? []) {
      if (step.do === "partial") onUpdate?.({ content: [{ type: "text", text: step.text }], details: {} });
      else if (step.do === "wait") await this.within(this.latch(step.latch).promise, `the release of latch ${step.latch}`);
      else if (step.do === "release") this.release(step.latch);
      else if (step.do === "reach") await this.reach(step.point);
      else if (step.do === "wait_abort") {
        const aborted = new Promise((resolve) => {
          if (!signal || signal.aborted) return resolve();
          signal.addEventListener("abort", () => resolve(), { once: true });
        });
        if (!signal) this.fail("a step waits for an abort but the call has no signal");
        await this.within(aborted, "the abort a step waits for");
      }
    }
  }
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

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && b.type === "text" && typeof b.text === "string").map((b) => b.text).join("\n");
}

// docs/PARITY.md "Normalising a trace": ids the scenario did not give become <id:N>, timestamps
// go, error messages become "<message>", non-object arguments "<unusable>".
class Normaliser {
  constructor(knownIds, kindOf) {
    this.known = knownIds;
    this.ids = new Map();
    this.kindOf = kindOf;
    this.run = 0;
    this.turn = 0;
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

  message(m) {
    if (m.role === "user") return { role: "user", text: textOf(m.content) };
    if (m.role === "assistant") {
      const calls = (m.content ?? []).filter((b) => b.type === "toolCall")
        .map((b) => ({ id: this.callId(b.id), name: String(b.name ?? ""), arguments: this.args(b.arguments) }));
      return {
        role: "assistant", text: textOf(m.content), tool_calls: calls, stop_reason: String(m.stopReason),
        error_message: m.errorMessage == null ? null : "<message>",
      };
    }
    return {
      role: "toolResult", tool_call_id: this.callId(m.toolCallId), tool_name: String(m.toolName ?? ""),
      is_error: Boolean(m.isError), error_kind: this.kindOf(m.toolCallId, m.toolName, m.isError),
      text: textOf(m.content), details: this.details(m.details), added_tool_names: [],
    };
  }

  event(e) {
    if (e.type === "message_update") return null;
    if (e.type === "agent_start") { this.run += 1; this.turn = 0; }
    if (e.type === "turn_start") this.turn += 1;
    const out = { type: e.type, run: Math.max(this.run, 1), turn: this.turn };
    switch (e.type) {
      case "agent_end": out.messages = e.messages.length; break;
      case "turn_end":
        out.stop_reason = String(e.message.stopReason);
        out.tool_results = e.toolResults.map((m) => this.callId(m.toolCallId));
        break;
      case "message_start": out.role = e.message?.role ?? "assistant"; break;
      case "message_end": out.message = this.message(e.message); break;
      case "tool_execution_start":
        Object.assign(out, { tool_call_id: this.callId(e.toolCallId), tool_name: e.toolName, arguments: this.args(e.args) });
        break;
      case "tool_execution_update":
        Object.assign(out, { tool_call_id: this.callId(e.toolCallId), tool_name: e.toolName, text: textOf(e.partialResult?.content) });
        break;
      case "tool_execution_end":
        Object.assign(out, {
          tool_call_id: this.callId(e.toolCallId), tool_name: e.toolName, is_error: Boolean(e.isError),
          error_kind: this.kindOf(e.toolCallId, e.toolName, e.isError), text: textOf(e.result?.content),
          details: this.details(e.result?.details), terminate: e.result?.terminate === true,
        });
        break;
      default: break;
    }
    return out;
  }
}

// ------------------------------------------------------------------------------ behaviours

const EMPTY_USAGE = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

function assistant(content, stopReason, errorMessage) {
  return { role: "assistant", content, api: "openai-completions", provider: "parity", model: "scripted",
    usage: EMPTY_USAGE, stopReason, errorMessage, timestamp: Date.now() };
}

// A scripted OpenAI reply as pi-ai's openai-completions provider turns it into a message: text,
// then toolCall blocks whose arguments are parsed leniently (parseStreamingJson) and whose id
// stays empty when the reply has none. pi reads one tool-call form only, so `form` is ignored.
function piReply(reply) {
  const m = reply.message;
  const content = [];
  if (m.content) content.push({ type: "text", text: m.content });
  for (const c of m.tool_calls ?? []) {
    content.push({ type: "toolCall", id: c.id || "", name: c.function.name, arguments: parseStreamingJson(c.function.arguments) });
  }
  const finish = reply.finish_reason ?? ((m.tool_calls ?? []).length ? "tool_calls" : "stop");
  const stop = { stop: "stop", length: "length", tool_calls: "toolUse", content_filter: "error" }[finish] ?? "stop";
  return assistant(content, stop, stop === "error" ? "Provider finish_reason: content_filter" : undefined);
}

class Aborted extends Error {}

// pi's StreamFn contract: never throw; a failure is an "error" event carrying a message whose
// stopReason is "error" or "aborted".
function scriptedStream(replies, harness) {
  let calls = 0;
  return (_model, _context, options) => {
    const stream = createAssistantMessageEventStream();
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
        message = reply.fail !== undefined ? assistant([], "error", reply.fail) : piReply(reply);
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

function firstRule(rules, toolCall) {
  return (rules ?? []).find((r) => (r.match?.tool ?? toolCall.name) === toolCall.name
    && (r.match?.tool_call_id ?? toolCall.id) === toolCall.id);
}

// ---------------------------------------------------------------------------- one scenario

function knownIds(scenario) {
  const ids = new Set();
  for (const r of scenario.replies) for (const c of r.message?.tool_calls ?? []) if (c.id) ids.add(c.id);
  for (const m of scenario.history ?? []) {
    for (const c of m.tool_calls ?? []) ids.add(c.id);
    if (m.role === "toolResult") ids.add(m.tool_call_id);
  }
  return ids;
}

function historyMessage(m) {
  const text = m.text ? [{ type: "text", text: m.text }] : [];
  if (m.role === "user") return { role: "user", content: text, timestamp: 0 };
  if (m.role === "assistant") {
    const calls = m.tool_calls.map((c) => ({ type: "toolCall", id: c.id, name: c.name, arguments: c.arguments }));
    return assistant([...text, ...calls], m.stop_reason, m.error_message ?? undefined);
  }
  return { role: "toolResult", toolCallId: m.tool_call_id, toolName: m.tool_name, content: text,
    details: { ...m.details, ...(m.error_kind ? { error_kind: m.error_kind } : {}) }, isError: m.is_error, timestamp: 0 };
}

function matches(point, event) {
  return Object.entries(point).every(([key, value]) => key === "nth"
    || (key === "role" && event.role === undefined ? event.message?.role === value : event[key] === value));
}

async function runScenario(scenario) {
  const harness = new Harness();
  const kinds = new Map(); // tool call id -> error kind the runner saw arise
  const prepared = new Set(); // calls that reached the before hook: their arguments were valid
  let preparing = null; // the call being prepared: pi prepares one at a time, after its start event
  let runTools = new Set(); // a run's tools: pi copies state.tools when the run starts
  let agent;

  const kindOf = (id, name, isError) => {
    if (kinds.has(id)) return kinds.get(id);
    if (!isError || prepared.has(id)) return null;
    return runTools.has(name) ? "schema_violation" : "tool_not_found";
  };
  const normaliser = new Normaliser(knownIds(scenario), kindOf);

  const later = new Map();
  const initial = [];
  for (const spec of scenario.tools ?? []) {
    const outcome = spec.outcome;
    const tool = {
      name: spec.name, label: spec.name, description: spec.description ?? "",
      parameters: spec.input_schema ?? { type: "object" },
      executionMode: spec.parallel ? "parallel" : "sequential",
      execute: async (toolCallId, params, signal, onUpdate) => {
        try {
          await harness.runSteps(spec.steps, signal, onUpdate);
          if (outcome.fail !== undefined) throw new Error(outcome.fail);
        } catch (error) {
          kinds.set(toolCallId, "tool_raised");
          throw error;
        }
        if (outcome.invalid_result) return "not a tool result";
        const details = { ...(outcome.details ?? {}) };
        if (outcome.register) {
          agent.state.tools = [...agent.state.tools, ...outcome.register.map((n) => later.get(n))];
          details.addedToolNames = [...outcome.register];
        }
        const text = outcome.echo ? canonical(params) : outcome.text;
        return { content: [{ type: "text", text }], details, terminate: outcome.terminate === true };
      },
    };
    if (spec.prepare) {
      tool.prepareArguments = (args) => {
        if (spec.prepare.fail === undefined) return { ...spec.prepare.defaults, ...args };
        kinds.set(preparing, "prepare_failed");
        throw new Error(spec.prepare.fail);
      };
    }
    // pi has no custom validator (spec.validate) and no per-call timeout (spec.timeout_s).
    if (spec.available === false) later.set(spec.name, tool);
    else initial.push(tool);
  }

  const hooks = scenario.hooks ?? {};
  agent = new Agent({
    initialState: {
      systemPrompt: scenario.system_prompt ?? "You are a test agent.",
      tools: initial,
      messages: (scenario.history ?? []).map(historyMessage),
    },
    streamFn: scriptedStream(scenario.replies, harness),
    toolExecution: scenario.execution ?? "sequential",
    steeringMode: scenario.steering_mode ?? "all",
    followUpMode: scenario.follow_up_mode ?? "one-at-a-time",
    beforeToolCall: async ({ toolCall }, signal) => {
      prepared.add(toolCall.id);
      const rule = firstRule(hooks.before, toolCall);
      if (!rule) return undefined;
      try {
        await harness.runSteps(rule.steps, signal);
        if (rule.fail !== undefined) throw new Error(rule.fail);
      } catch (error) {
        kinds.set(toolCall.id, "hook_failed");
        throw error;
      }
      if (rule.block !== undefined) {
        kinds.set(toolCall.id, "blocked");
        return typeof rule.block === "string" ? { block: true, reason: rule.block } : { block: true };
      }
      return rule.allow ? { block: false } : undefined;
    },
    afterToolCall: async ({ toolCall }, signal) => {
      const rule = firstRule(hooks.after, toolCall);
      if (!rule) return undefined;
      try {
        await harness.runSteps(rule.steps, signal);
        if (rule.fail !== undefined) throw new Error(rule.fail);
      } catch (error) {
        kinds.set(toolCall.id, "hook_failed");
        throw error;
      }
      const o = rule.override;
      if (!o) return undefined;
      return {
        ...(o.content !== undefined ? { content: [{ type: "text", text: o.content }] } : {}),
        ...(o.details !== undefined ? { details: o.details } : {}),
        ...(o.is_error !== undefined ? { isError: o.is_error } : {}),
        ...(o.terminate !== undefined ? { terminate: o.terminate } : {}),
      };
    },
  });

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
  const triggers = [];
  for (const input of scenario.inputs) {
    if (typeof input.at === "string") harness.atPoint(input.at, () => perform(input));
    else if (input.at) triggers.push({ point: input.at, left: input.at.nth ?? 1, input });
  }

  const events = [];
  const responses = [];
  agent.subscribe(async (event) => {
    if (event.type === "agent_start") runTools = new Set(agent.state.tools.map((t) => t.name));
    if (event.type === "tool_execution_start") preparing = event.toolCallId;
    const normal = normaliser.event(event);
    if (normal === null) return;
    events.push(normal);
    if (event.type === "agent_end") {
      const last = [...event.messages].reverse().find((m) => m.role === "assistant");
      if (last) responses.push(normaliser.message(last));
    }
    for (const trigger of [...triggers]) {
      if (matches(trigger.point, normal) && --trigger.left === 0) {
        triggers.splice(triggers.indexOf(trigger), 1);
        await perform(trigger.input);
      }
    }
  });

  for (const input of scenario.inputs) {
    if (input.at !== undefined) continue;
    try {
      await perform(input);
      await agent.waitForIdle();
    } catch (error) {
      harness.problems.push(`input ${JSON.stringify(input)} was refused: ${error?.message ?? error}`);
    }
  }
  return {
    events, responses,
    history: agent.state.messages.map((m) => normaliser.message(m)),
    problems: harness.problems,
  };
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

async function main(argv) {
  if (argv.length < 2) {
    console.error("usage: node runner.js SCENARIO_DIR_OR_FILE... OUT_DIR");
    return 2;
  }
  const out = argv[argv.length - 1];
  mkdirSync(out, { recursive: true });
  for (const file of scenarioFiles(argv.slice(0, -1))) {
    const scenario = JSON.parse(readFileSync(file, "utf8"));
    const result = await runScenario(scenario);
    const lines = [{ type: "trace", format: 1, scenario: scenario.name, implementation: IMPLEMENTATION },
      ...result.events,
      ...result.responses.map((message) => ({ type: "response", message })),
      ...result.history.map((message) => ({ type: "history", message }))];
    writeFileSync(join(out, `${basename(file, ".json")}.jsonl`), lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const note = result.problems.length ? ` (harness: ${result.problems.join("; ")})` : "";
    console.log(`traced ${scenario.name}${note}`);
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
