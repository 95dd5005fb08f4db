import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  parseSnapshot,
  type Snapshot,
  type UiCampaign,
  type UiDataset,
  type UiNode,
} from '../snapshot-schema.ts';
import { duration, gib, percent, rate } from './format.ts';
import './style.css';

// The web view: one EventSource on /events; every event is a full snapshot, parsed with the schema
// the server built it with, and rendered whole.

function Nodes({ nodes }: { nodes: UiNode[] }) {
  return (
    <section>
      <h2>Fleet ({nodes.length} nodes)</h2>
      <table>
        <thead>
          <tr>
            <th>node</th>
            <th>host</th>
            <th>roles</th>
            <th>models</th>
            <th class="num">memory free</th>
            <th class="num">load q+r/c</th>
            <th class="num">warm</th>
            <th>sandbox</th>
            <th class="num">trust</th>
            <th class="num">seen</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.peerId} data-testid="node" data-peer={n.peerId} title={n.peerId}>
              <td>
                {n.shortId}
                {n.self ? <span class="muted"> (this node)</span> : null}
              </td>
              <td>{n.host ?? '–'}</td>
              <td>{n.roles.join(', ')}</td>
              <td>{n.models.map((m) => `${m.id}${m.loaded ? '' : ' (not loaded)'}`).join(', ') || '–'}</td>
              <td class="num">
                {gib(n.memory.free)} / {gib(n.memory.total)}
              </td>
              <td class="num">
                {n.load.queued}+{n.load.running}/{n.load.capacity}
              </td>
              <td class="num">{n.warm}</td>
              <td class={n.sandbox.ok ? 'ok' : 'notok'}>{n.sandbox.backend}</td>
              <td class="num">{n.trust === null ? '–' : n.trust.toFixed(2)}</td>
              <td class="num">{duration(n.lastSeenMs)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function Campaign({ c }: { c: UiCampaign }) {
  return (
    <div
      class="campaign"
      data-testid="campaign"
      data-name={c.name}
      data-scored={c.scored}
      data-planned={c.planned}
    >
      <div>
        <b>{c.name}</b> <span class="muted">{c.status}</span>
        {c.problem ? <span class="notok"> {c.problem}</span> : null}
      </div>
      <div class="bar" role="progressbar" aria-valuenow={c.scored} aria-valuemax={c.planned}>
        <div style={{ width: `${(c.progress * 100).toFixed(1)}%` }} />
      </div>
      <div class="figures">
        <span data-testid="campaign-progress">
          <b>
            {c.scored} / {c.planned}
          </b>{' '}
          scored
        </span>
        <span>
          <b>{c.verified}</b> verified
        </span>
        <span>
          <b>{rate(c.tokensPerSecond)}</b> tokens/s
        </span>
        <span>
          <b>{percent(c.cacheHitRate)}</b> cache hits
        </span>
        <span>
          ETA <b>{duration(c.etaMs)}</b>
        </span>
      </div>
      <table>
        <thead>
          <tr>
            <th>node</th>
            <th class="num">running</th>
            <th class="num">generated</th>
            <th class="num">scored</th>
            <th class="num">verified</th>
          </tr>
        </thead>
        <tbody>
          {c.nodes.map((n) => (
            <tr key={n.peerId} title={n.peerId}>
              <td>{n.shortId}</td>
              <td class="num">{n.running}</td>
              <td class="num">{n.generated}</td>
              <td class="num">{n.scored}</td>
              <td class="num">{n.verified}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Campaigns({ campaigns }: { campaigns: UiCampaign[] }) {
  return (
    <section>
      <h2>Campaigns</h2>
      {campaigns.length === 0 ? (
        <p class="empty">No campaign submitted from this node yet (vtnode run).</p>
      ) : (
        campaigns.map((c) => <Campaign key={c.name} c={c} />)
      )}
    </section>
  );
}

function Growth({ growth }: { growth: UiDataset['growth'] }) {
  if (growth.length < 2) return <p class="empty">Growth appears once samples arrive over time.</p>;
  const t0 = growth[0]!.at;
  const span = Math.max(1, growth.at(-1)!.at - t0);
  const top = Math.max(1, growth.at(-1)!.samples);
  const points = growth.map((p) => `${((p.at - t0) / span) * 300},${100 - (p.samples / top) * 95}`).join(' ');
  return (
    <svg viewBox="0 0 300 100" preserveAspectRatio="none" aria-label="samples over time">
      <polyline points={points} />
    </svg>
  );
}

function Rewards({ bins }: { bins: number[] }) {
  const top = Math.max(1, ...bins);
  const w = 300 / bins.length;
  return (
    <svg viewBox="0 0 300 100" preserveAspectRatio="none" aria-label="reward histogram, 0 to 1">
      {bins.map((b, i) => (
        <rect key={i} x={i * w + 1} width={w - 2} y={100 - (b / top) * 95} height={(b / top) * 95}>
          <title>
            {i === bins.length - 1
              ? `reward 1: ${b}`
              : `reward ${(i / 10).toFixed(1)}–${((i + 1) / 10).toFixed(1)}: ${b}`}
          </title>
        </rect>
      ))}
    </svg>
  );
}

function Dataset({ d }: { d: UiDataset }) {
  return (
    <section data-testid="dataset">
      <h2>Dataset</h2>
      <div class="figures">
        <span>
          <b>{d.samples}</b> samples
        </span>
        <span>
          <b>{d.bodies}</b> bodies
        </span>
        <span>
          <b>{d.pending}</b> pending
        </span>
        <span>
          <b>{d.rejected}</b> rejected
        </span>
        <span>
          <b>{d.audits}</b> audits ({d.auditFailures} failed)
        </span>
        <span>
          lag p50 <b>{duration(d.lagP50Ms)}</b>, p99 <b>{duration(d.lagP99Ms)}</b>
        </span>
      </div>
      <div class="charts">
        <div>
          <div class="muted">samples over time</div>
          <Growth growth={d.growth} />
        </div>
        <div>
          <div class="muted">reward histogram (0 → 1; the last bar is reward 1)</div>
          <Rewards bins={d.rewards} />
        </div>
      </div>
      <table>
        <thead>
          <tr>
            <th>model</th>
            <th class="num">tasks</th>
            <th class="num">samples</th>
            <th class="num">pass@1</th>
            <th class="num">pass@k</th>
          </tr>
        </thead>
        <tbody>
          {d.models.map((m) => (
            <tr key={m.model} data-testid="model" data-model={m.model} data-samples={m.samples}>
              <td>{m.model}</td>
              <td class="num">{m.tasks}</td>
              <td class="num">{m.samples}</td>
              <td class="num">{percent(m.pass1)}</td>
              <td class="num">
                {percent(m.passk)} <span class="muted">k={m.k}</span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function App() {
  const [snap, setSnap] = useState<Snapshot | null>(null);
  const [live, setLive] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const source = new EventSource('events');
    source.addEventListener('snapshot', (e) => {
      try {
        setSnap(parseSnapshot((e as MessageEvent<string>).data, 'the snapshot event'));
        setError(null);
      } catch (err) {
        setError((err as Error).message);
      }
    });
    source.onopen = () => setLive(true);
    source.onerror = () => setLive(false);
    return () => source.close();
  }, []);
  return (
    <>
      <header>
        <h1>vtnode</h1>
        {snap ? (
          <span class="muted">
            fleet <b>{snap.fleet}</b>, node {snap.self.slice(-8)}
          </span>
        ) : null}
        <span class={`live ${live ? 'on' : 'off'}`} data-testid="live">
          {live ? 'live' : 'reconnecting…'}
          {snap ? ` · ${new Date(snap.at).toLocaleTimeString()}` : ''}
        </span>
      </header>
      <main>
        {error ? <p class="notok">{error}</p> : null}
        {snap ? (
          <>
            <Nodes nodes={snap.nodes} />
            <Campaigns campaigns={snap.campaigns} />
            {snap.dataset ? <Dataset d={snap.dataset} /> : null}
          </>
        ) : (
          <p class="empty">Waiting for the node…</p>
        )}
      </main>
    </>
  );
}

// The server's page holds a placeholder until the script runs: render replaces it (preact would keep
// DOM it did not create beside its own).
const root = document.getElementById('app')!;
root.replaceChildren();
render(<App />, root);
