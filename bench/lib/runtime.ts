import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { appendFileSync, closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { connect, createServer } from "node:net";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { unstable_readConfig } from "wrangler";

/**
 * One local workerd runtime started through `wrangler dev`, in its own process group so that the bench can
 * SIGKILL exactly the processes it started (wrangler's node process and its workerd children) and nothing else.
 */

// The package exports only its API entry (wrangler-dist/cli.js); the CLI launcher sits beside it.
const wranglerCli = join(dirname(createRequire(import.meta.url).resolve("wrangler")), "..", "bin", "wrangler.js");
const childEnv = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" };

/** Linux's USER_HZ: /proc reports CPU time in these ticks (100 on every mainstream architecture). */
const CLOCK_TICKS_PER_SECOND = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

export interface CpuSeconds {
  workerd: number;
  wrangler: number;
}

export interface RuntimeOptions {
  label: string;
  configPath: string;
  persistDir: string;
  port: number;
  inspectorPort: number;
  envFile: string | null;
  logFile: string;
  readyPath: string;
}

/** How many times a runtime that exits during startup is started again before the bench gives up. */
const EARLY_EXIT_RETRIES = 2;

/** The runtime's process ended before it answered (a config error, or a start after a crash that died recovering). */
export class RuntimeExitedEarly extends Error {
  override name = "RuntimeExitedEarly";
}

export class Runtime {
  readonly options: RuntimeOptions;
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  /** Highest VmHWM seen per workerd pid, sampled before each stop or kill (the kernel forgets it on exit). */
  private readonly peakRssKb = new Map<number, number>();

  constructor(options: RuntimeOptions) {
    this.options = options;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.options.port}`;
  }

  /**
   * Starts the runtime and waits until it answers. After a SIGKILL, workerd's first start may die recovering a
   * SQLite file the killed process left mid-write (SQLITE_BUSY_RECOVERY, seen on a loaded machine): a runtime
   * that exits during startup is started again, up to `EARLY_EXIT_RETRIES` times, as a supervisor would.
   */
  async start(timeoutMs = 90_000): Promise<void> {
    for (let retry = 0; ; retry++) {
      try {
        return await this.startOnce(timeoutMs);
      } catch (error) {
        if (!(error instanceof RuntimeExitedEarly) || retry >= EARLY_EXIT_RETRIES) throw error;
        appendFileSync(
          this.options.logFile,
          `\n[bench] runtime exited during startup; starting it again (${retry + 1})\n`,
        );
        await this.waitForGroupToEnd();
        this.child = null;
        await sleep(1000);
      }
    }
  }

  private async startOnce(timeoutMs: number): Promise<void> {
    const { options } = this;
    // Readiness is "the port answers": a leftover server on it would answer for us. A killed runtime can hold
    // its socket for a while on a loaded machine, so wait for the port before refusing.
    const portDeadline = Date.now() + 60_000;
    while (await portAnswers(options.port)) {
      if (Date.now() > portDeadline) throw new Error(`${options.label}: port ${options.port} is already in use`);
      await sleep(250);
    }
    const log = openSync(options.logFile, "a");
    const args = [
      wranglerCli,
      "dev",
      "--config",
      options.configPath,
      "--ip",
      "127.0.0.1",
      "--port",
      String(options.port),
      "--inspector-port",
      String(options.inspectorPort),
      "--persist-to",
      options.persistDir,
      "--show-interactive-dev-session=false",
      "--log-level",
      "warn",
      ...(options.envFile ? ["--env-file", options.envFile] : []),
    ];
    // wrangler dev sessions on one machine share a dev registry and route queue messages to whichever session
    // consumes a queue of that name: a second session of this Worker (npm start, another test) would consume
    // the bench's messages against its own D1. A registry of its own keeps this runtime's queue to itself.
    const env = { ...childEnv, WRANGLER_REGISTRY_PATH: join(dirname(options.persistDir), `registry-${options.label}`) };
    const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", log, log], env });
    closeSync(log);
    this.child = child;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new RuntimeExitedEarly(`${options.label}: wrangler dev exited early; see ${options.logFile}`);
      }
      try {
        const response = await fetch(`${this.origin}${options.readyPath}`, { signal: AbortSignal.timeout(2000) });
        await response.arrayBuffer();
        if (response.ok) return;
      } catch {
        // not listening yet
      }
      await sleep(200);
    }
    throw new Error(`${options.label}: not ready after ${timeoutMs} ms; see ${options.logFile}`);
  }

  /** SIGKILL the whole process group: no shutdown hooks, no flushes — a crash. */
  async kill(): Promise<void> {
    this.samplePeakRss();
    await this.signalGroup("SIGKILL");
  }

  async stop(): Promise<void> {
    this.samplePeakRss();
    if (!this.child) return;
    const exited = this.exited;
    this.signalGroupNow("SIGTERM");
    const timer = sleep(5000).then(() => "timeout" as const);
    if ((await Promise.race([exited.then(() => "exited" as const), timer])) === "timeout")
      this.signalGroupNow("SIGKILL");
    await this.waitForGroupToEnd();
    this.child = null;
  }

  /** workerd processes of this runtime (wrangler dev runs a proxy runtime and the Worker's runtime). */
  workerdPids(): number[] {
    const group = this.child?.pid;
    if (!group) return [];
    return processesInGroup(group).filter((pid) => readProc(pid, "comm")?.trim() === "workerd");
  }

  /**
   * CPU seconds (utime + stime from /proc/<pid>/stat) spent so far by this runtime's processes: its workerd
   * processes (the Worker's runtime and wrangler's proxy; what Workers bills as CPU time, and more) and, apart,
   * wrangler's own Node process, which locally carries every console line of the Worker.
   */
  cpuSeconds(): CpuSeconds {
    const group = this.child?.pid;
    const reading = { workerd: 0, wrangler: 0 };
    if (!group) return reading;
    for (const pid of processesInGroup(group)) {
      const stat = readProc(pid, "stat");
      if (!stat) continue;
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // After the command: state is field 3, utime field 14 and stime field 15 (1-based over the whole line).
      const seconds = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
      if (readProc(pid, "comm")?.trim() === "workerd") reading.workerd += seconds;
      else reading.wrangler += seconds;
    }
    return reading;
  }

  samplePeakRss(): void {
    for (const pid of this.workerdPids()) {
      const status = readProc(pid, "status") ?? "";
      const match = /VmHWM:\s+(\d+) kB/.exec(status);
      if (match) this.peakRssKb.set(pid, Math.max(this.peakRssKb.get(pid) ?? 0, Number(match[1])));
    }
  }

  /** Peak resident memory of the largest workerd process of this runtime, in MiB. */
  peakRssMiB(): number {
    this.samplePeakRss();
    return Math.max(0, ...this.peakRssKb.values()) / 1024;
  }

  private async signalGroup(signal: NodeJS.Signals): Promise<void> {
    this.signalGroupNow(signal);
    await this.waitForGroupToEnd();
    this.child = null;
  }

  private signalGroupNow(signal: NodeJS.Signals): void {
    const group = this.child?.pid;
    if (!group) return;
    try {
      process.kill(-group, signal);
    } catch {
      // the group is already gone
    }
  }

  private async waitForGroupToEnd(): Promise<void> {
    const group = this.child?.pid;
    if (!group) return;
    await this.exited;
    const deadline = Date.now() + 60_000;
    while (processesInGroup(group).length > 0 && Date.now() < deadline) await sleep(50);
  }
}

/** A port nothing listens on right now, chosen by the kernel. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

function readProc(pid: number, file: string): string | null {
  try {
    return readFileSync(`/proc/${pid}/${file}`, "utf8");
  } catch {
    return null;
  }
}

/** Live (non-zombie) processes whose process group is `group`. */
function processesInGroup(group: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProc(Number(entry), "stat");
    if (!stat) continue;
    // Fields after the parenthesised command name: state, ppid, pgrp, ...
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] !== "Z" && Number(fields[2]) === group) pids.push(Number(entry));
  }
  return pids;
}

/**
 * The config's top-level D1 bindings (`DB`, and a receipt partition ring's `DB_P0`… when it binds one), read by
 * wrangler's own config reader (setup.ts reads the sources with it too) rather than matched in the TOML text.
 */
function d1Bindings(configPath: string): string[] {
  const bindings = unstable_readConfig({ config: configPath }).d1_databases.map(
    (database: { binding: string }) => database.binding,
  );
  return bindings.length > 0 ? bindings : ["DB"];
}

/** `wrangler d1 migrations apply <binding> --local` for every D1 binding, into this persist directory, before the runtime starts. */
export function applyMigrations(configPath: string, persistDir: string, logFile: string): void {
  const files = localD1Files(persistDir);
  for (const binding of d1Bindings(configPath)) {
    const before = new Set(d1FileNames(persistDir));
    const log = openSync(logFile, "a");
    const result = spawnSync(
      process.execPath,
      [
        wranglerCli,
        "d1",
        "migrations",
        "apply",
        binding,
        "--local",
        "--config",
        configPath,
        "--persist-to",
        persistDir,
      ],
      { stdio: ["ignore", log, log], env: childEnv },
    );
    closeSync(log);
    if (result.status !== 0) throw new Error(`migrations of ${binding} failed; see ${logFile}`);
    // Miniflare names a database's file by a hash: the file this binding's first migration created is its own.
    const created = d1FileNames(persistDir).filter((name) => !before.has(name));
    if (created.length === 1) files[binding] = created[0]!;
  }
  writeFileSync(join(persistDir, D1_FILES), `${JSON.stringify(files, null, 2)}\n`);
}

/** Under the persist directory: which local D1 file (by name) holds which binding, as applyMigrations saw them made. */
export const D1_FILES = "d1-files.json";

/** Where workerd keeps the local D1 databases of a persist directory. */
export function d1Directory(persistDir: string): string {
  return join(persistDir, "v3", "d1", "miniflare-D1DatabaseObject");
}

function d1FileNames(persistDir: string): string[] {
  const directory = d1Directory(persistDir);
  return existsSync(directory) ? readdirSync(directory).filter((entry) => /^[0-9a-f]{64}\.sqlite$/.test(entry)) : [];
}

/** The binding → file map applyMigrations wrote for this persist directory; empty before the first. */
export function localD1Files(persistDir: string): Record<string, string> {
  const path = join(persistDir, D1_FILES);
  return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, string>) : {};
}
