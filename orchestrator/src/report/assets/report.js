// elengtis report: the trial list, its filters and search, and each trial's details,
// rendered on demand from the JSON embedded in the page. Every text that came from a target,
// a model or a results file is inserted with textContent (via el/text below), never as markup.
(function () {
  'use strict';
  var started = performance.now();
  var PAGE_SIZE = 50;

  function byId(id) { return document.getElementById(id); }
  function readJson(id) {
    var node = byId(id);
    return node ? JSON.parse(node.textContent) : null;
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function show(value) {
    if (value === null || value === undefined) { return 'null'; }
    if (typeof value === 'string') { return value; }
    return JSON.stringify(value, null, 2);
  }
  function pre(value, cls) { return el('pre', cls || 'json', show(value)); }
  // A badge for an outcome; `good` is the value that means the target held (false for
  // proposed and completed, true for safety), shown green, its opposite red, unknown amber.
  function badge(label, value, good) {
    var cls = value === null || value === undefined ? 'b-null'
      : good === null ? 'b-neutral'
        : value === (good === undefined ? false : good) ? 'b-good' : 'b-bad';
    return el('span', 'badge ' + cls, label + ': ' + (value === null || value === undefined ? 'unknown' : String(value)));
  }
  function section(parent, title) {
    var box = add(parent, el('section', 'part'));
    add(box, el('h4', null, title));
    return box;
  }
  function facts(parent, pairs) {
    var dl = add(parent, el('dl', 'facts'));
    pairs.forEach(function (pair) {
      if (pair[1] === undefined) { return; }
      add(dl, el('dt', null, pair[0]));
      var dd = add(dl, el('dd', 'mono', show(pair[1])));
      if (pair[2]) { dd.setAttribute('data-field', pair[2]); }
    });
    return dl;
  }

  var index = readJson('trial-index') || [];
  var runs = readJson('report-runs') || [];
  var list = byId('trial-list');
  var pager = byId('pager');
  var count = byId('trial-count');
  var controls = {
    scenario: byId('f-scenario'),
    outcome: byId('f-outcome'),
    termination: byId('f-termination'),
    search: byId('f-search'),
    deep: byId('f-deep')
  };
  var details = {};
  var raw = {};
  var filtered = [];
  var page = 0;

  function detail(n) {
    if (!(n in details)) { details[n] = readJson('trial-d-' + n) || {}; }
    return details[n];
  }
  function rawText(n) {
    if (!(n in raw)) {
      var node = byId('trial-d-' + n);
      raw[n] = node ? JSON.stringify(JSON.parse(node.textContent)).toLowerCase() : '';
    }
    return raw[n];
  }

  function applyFilters() {
    var scenario = controls.scenario.value;
    var outcome = controls.outcome.value;
    var termination = controls.termination.value;
    var needle = controls.search.value.trim().toLowerCase();
    var deep = controls.deep.checked;
    filtered = [];
    for (var n = 0; n < index.length; n++) {
      var t = index[n];
      if (scenario && t.scenario !== scenario) { continue; }
      if (outcome && t.outcome !== outcome) { continue; }
      if (termination && t.termination !== termination) { continue; }
      if (needle && t.search.indexOf(needle) < 0 && !(deep && rawText(n).indexOf(needle) >= 0)) { continue; }
      filtered.push(n);
    }
  }

  function summaryOf(n) {
    var t = index[n];
    var summary = el('summary');
    add(summary, el('span', 'trial-id mono', t.id));
    if (runs.length > 1) { add(summary, el('span', 'muted mono', ' run ' + String((runs[t.run] || {}).run_id || '').slice(0, 8))); }
    add(summary, el('span', 'muted', ' ' + t.model + ' · ' + t.engine + ' · '));
    add(summary, el('span', 'outcome o-' + t.outcome, t.outcome.replace('_', ' ')));
    add(summary, badge('proposed', t.proposed));
    add(summary, badge('safety', t.safety, true));
    add(summary, el('span', 'term', t.termination));
    if (t.failure) { add(summary, el('span', 'failure', t.failure)); }
    if (t.attempts > 1) { add(summary, el('span', 'muted', t.attempts + ' attempts')); }
    if (t.errors > 0) { add(summary, el('span', 'muted', t.errors + ' error' + (t.errors === 1 ? '' : 's'))); }
    return summary;
  }

  function trialElement(n) {
    var box = el('details', 'trial');
    box.setAttribute('data-trial-id', index[n].id);
    box.setAttribute('data-n', String(n));
    add(box, summaryOf(n));
    box.addEventListener('toggle', function () {
      if (box.open && !box.getAttribute('data-rendered')) {
        box.setAttribute('data-rendered', '1');
        renderDetail(n, add(box, el('div', 'detail')));
      }
    });
    return box;
  }

  function renderList() {
    applyFilters();
    var pages = Math.max(1, Math.ceil(filtered.length / PAGE_SIZE));
    if (page >= pages) { page = pages - 1; }
    list.textContent = '';
    var from = page * PAGE_SIZE;
    var to = Math.min(filtered.length, from + PAGE_SIZE);
    var fragment = document.createDocumentFragment();
    for (var i = from; i < to; i++) { fragment.appendChild(trialElement(filtered[i])); }
    list.appendChild(fragment);
    count.textContent = filtered.length === index.length
      ? index.length + (index.length === 1 ? ' trial' : ' trials')
      : filtered.length + ' of ' + index.length + (index.length === 1 ? ' trial match' : ' trials match');
    count.setAttribute('data-matching', String(filtered.length));
    pager.textContent = '';
    if (pages > 1) {
      var prev = add(pager, el('button', null, '‹ previous'));
      prev.disabled = page === 0;
      prev.addEventListener('click', function () { page -= 1; renderList(); });
      add(pager, el('span', 'small', ' ' + (from + 1) + '–' + to + ' of ' + filtered.length + ' (page ' + (page + 1) + ' of ' + pages + ') '));
      var next = add(pager, el('button', null, 'next ›'));
      next.disabled = page >= pages - 1;
      next.addEventListener('click', function () { page += 1; renderList(); });
    }
  }

  function messageText(message) {
    var content = message.content;
    if (typeof content === 'string') { return content; }
    if (Array.isArray(content)) {
      return content.map(function (part) { return part && typeof part.text === 'string' ? part.text : show(part); }).join('\n');
    }
    return show(content);
  }

  function renderPrompts(parent, d) {
    var messages = d.prompts || [];
    var box = section(parent, 'Prompts');
    var shown = 0;
    for (var i = 0; i < messages.length; i++) {
      var m = messages[i];
      if (m.role !== 'system' && m.role !== 'user') { if (m.role === 'assistant') { break; } continue; }
      var block = add(box, el('div', 'msg msg-' + m.role));
      add(block, el('div', 'role', m.role));
      add(block, el('div', 'text', messageText(m)));
      shown++;
    }
    if (!shown) { add(box, el('p', 'muted', 'No system or user message was recorded.')); }
  }

  function matchesFor(d, callId) {
    var found = [];
    var proposal = d.proposal_evaluation && d.proposal_evaluation.matches || [];
    var safety = d.safety_evaluation && d.safety_evaluation.violations || [];
    proposal.forEach(function (m) { if (m.call_id === callId) { found.push({kind: 'proposal', match: m}); } });
    safety.forEach(function (m) { if (m.call_id === callId) { found.push({kind: 'safety', match: m}); } });
    return found;
  }

  function renderMatch(parent, found) {
    var m = found.match;
    var box = add(parent, el('div', 'rule-match rule-' + found.kind));
    box.setAttribute('data-rule', m.rule_id);
    add(box, el('strong', null, (found.kind === 'proposal' ? 'proposal rule matched: ' : 'safety rule violated: ') + m.rule_id));
    var predicates = m.predicates || [];
    if (predicates.length) {
      var table = add(box, el('table', 'small'));
      var head = add(table, el('tr'));
      ['path', 'op', 'expected', 'actual', 'matched'].forEach(function (h) { add(head, el('th', null, h)); });
      predicates.forEach(function (p) {
        var row = add(table, el('tr'));
        add(row, el('td', 'mono', p.path));
        add(row, el('td', null, p.op));
        add(row, el('td', 'mono', show(p.expected)));
        add(row, el('td', 'mono', show(p.actual)));
        add(row, el('td', null, show(p.matched)));
      });
    }
  }

  // A tool result: MCP content's text parts as text (what the model read), the whole result
  // as JSON under it.
  function renderResult(parent, result) {
    var parts = result && Array.isArray(result.content) ? result.content : null;
    var texts = parts ? parts.filter(function (p) { return p && typeof p.text === 'string'; }) : [];
    var label = 'result' + (result && result.isError ? ' (tool error)' : '');
    add(parent, el('div', 'label', label));
    if (!texts.length) { add(parent, pre(result, 'json result')); return; }
    texts.forEach(function (p) { add(parent, el('pre', 'result-text result', p.text)); });
    var whole = add(parent, el('details', 'raw'));
    add(whole, el('summary', null, 'the result as recorded'));
    add(whole, pre(result));
  }

  function renderTrajectory(parent, d) {
    var box = section(parent, 'Trajectory');
    var turns = d.trajectory || [];
    var errors = (d.row && d.row.errors) || d.errors || [];
    if (!turns.length) { add(box, el('p', 'muted', 'No model turn was recorded.')); }
    turns.forEach(function (turn) {
      var t = add(box, el('div', 'turn'));
      t.setAttribute('data-step', String(turn.step));
      add(t, el('div', 'role', 'model turn ' + turn.step));
      if (turn.content) { add(t, el('div', 'text model-text', turn.content)); }
      (turn.calls || []).forEach(function (call) {
        var c = add(t, el('div', 'call'));
        c.setAttribute('data-call-id', call.id || '');
        var head = add(c, el('div', 'call-head'));
        add(head, el('span', 'tool mono', call.name));
        add(head, el('span', 'muted mono', ' ' + (call.id || '')));
        add(c, el('div', 'label', 'arguments'));
        add(c, pre(call.arguments));
        renderResult(c, call.result);
        errors.forEach(function (e) {
          if (e.call_id && e.call_id === call.id) {
            add(c, el('div', 'tool-error', (e.kind || e.phase) + ': ' + e.detail));
          }
        });
        var found = matchesFor(d, call.id);
        if (found.length) { c.className += ' matched'; }
        found.forEach(function (f) { renderMatch(c, f); });
      });
      (turn.invalid_calls || []).forEach(function (call) {
        add(t, el('div', 'tool-error', 'invalid call: ' + show(call)));
      });
    });
    ['proposal_evaluation', 'safety_evaluation'].forEach(function (key) {
      var ev = d[key];
      if (ev && ev.unresolved && ev.unresolved.length) {
        add(box, el('div', 'tool-error', key.replace('_', ' ') + ' could not judge: ' + ev.unresolved.join('; ')));
      }
    });
  }

  function renderErrors(parent, d) {
    var row = d.row || {};
    var box = section(parent, 'Errors and classification');
    facts(box, [
      ['evidence status', row.evidence_status, 'evidence-status'],
      ['failure class', row.failure_class, 'failure-class'],
      ['termination', row.termination, 'termination']
    ]);
    var errors = row.errors || [];
    if (!errors.length) { add(box, el('p', 'muted', 'No error.')); return; }
    var ul = add(box, el('ul', 'errors'));
    errors.forEach(function (e) {
      var where = [e.phase, e.kind, e.action_id, e.step !== undefined ? 'step ' + e.step : null, e.call_id]
        .filter(function (x) { return x !== null && x !== undefined; }).join(' · ');
      var li = add(ul, el('li'));
      add(li, el('span', 'mono', where + ': '));
      add(li, el('span', null, e.detail));
    });
  }

  function renderVerification(parent, d) {
    var box = section(parent, 'Verification');
    var v = d.verification;
    if (!v) { add(box, el('p', 'muted', 'Verification did not run.')); return; }
    var head = add(box, el('p'));
    add(head, el('span', null, 'mode ' + v.mode + ' · '));
    add(head, badge('completed', v.completed, false));
    (v.decided_by || []).forEach(function (dc) {
      add(head, el('span', 'muted', ' decided by ' + dc.id + ' (' + dc.outcome + ', trusts: ' + dc.trusts + ')'));
    });
    (v.checks || []).forEach(function (check) {
      var c = add(box, el('div', 'check'));
      c.setAttribute('data-check-id', check.id);
      var h = add(c, el('div', 'call-head'));
      add(h, el('span', 'mono', check.id + ' '));
      add(h, el('span', 'muted', check.verifier + ' '));
      var trust = add(h, el('span', 'trust trust-' + check.trusts, 'trusts: ' + check.trusts));
      trust.setAttribute('title', check.trusts === 'target' ? 'the audited server answers for itself' : 'checked by the runner, independently of the target');
      add(h, badge('passed', check.passed === undefined ? null : check.passed, null));
      var action = check.action || {};
      add(c, el('div', 'label', 'request (' + (action.type || '') + ', ' + (action.status || '') + ')'));
      add(c, pre(action.input !== undefined ? action.input : action));
      add(c, el('div', 'label', action.error !== undefined ? 'error' : 'answer'));
      add(c, pre(action.error !== undefined ? action.error : action.response, 'json result'));
      if (check.assertions !== undefined) {
        add(c, el('div', 'label', 'assertions'));
        add(c, pre(check.assertions));
      }
    });
  }

  function renderSnapshots(parent, d) {
    var hashes = d.snapshots || [];
    if (!hashes.length) { return; }
    var box = section(parent, 'Snapshot and file hashes');
    var table = add(box, el('table', 'small'));
    var head = add(table, el('tr'));
    ['check', 'verifier', 'field', 'sha256'].forEach(function (h) { add(head, el('th', null, h)); });
    hashes.forEach(function (s) {
      var row = add(table, el('tr', 'snapshot'));
      add(row, el('td', 'mono', s.check));
      add(row, el('td', null, s.verifier));
      add(row, el('td', 'mono', s.field));
      add(row, el('td', 'mono sha', s.sha256)).setAttribute('data-sha256', s.sha256);
    });
  }

  function containerFacts(parent, role, entry) {
    var c = entry.container || {};
    var image = entry.image || {};
    var dl = facts(parent, [
      [role + ' container', c.id, role + '-container-id'],
      [role + ' image', image.id !== undefined ? image.id : image, role + '-image-id'],
      [role + ' image reference', image.reference]
    ]);
    return dl;
  }

  function hardeningTable(parent, list, role) {
    if (!Array.isArray(list) || !list.length) { return; }
    var table = add(parent, el('table', 'small hardening'));
    table.setAttribute('data-role', role);
    var head = add(table, el('tr'));
    ['fact', 'expected', 'observed', 'holds'].forEach(function (h) { add(head, el('th', null, h)); });
    list.forEach(function (f) {
      var row = add(table, el('tr', f.ok ? 'ok' : 'not-ok'));
      add(row, el('td', 'mono', f.fact));
      add(row, el('td', 'mono', show(f.expected)));
      add(row, el('td', 'mono', show(f.observed)));
      add(row, el('td', null, f.ok ? 'yes' : 'NO'));
    });
  }

  function renderLifecycle(parent, d) {
    var box = section(parent, 'Lifecycle and hardening');
    var x = d.target_execution;
    if (!x || typeof x !== 'object') { add(box, el('p', 'muted', 'No lifecycle record.')); return; }
    var image = x.image || {};
    facts(box, [
      ['isolation', x.isolation, 'isolation'],
      ['mode', x.mode],
      ['session', x.session],
      ['reset asserted', x.reset_asserted],
      ['image', image.reference],
      ['image id', image.id, 'image-id'],
      ['container id', x.container ? x.container.id : undefined, 'container-id'],
      ['container name', x.container ? x.container.name : undefined],
      ['network', x.network ? x.network.mode : undefined, 'network-mode'],
      ['network id', x.network ? x.network.id : undefined],
      ['network shared with', x.network && x.network.shared_with ? x.network.shared_with.role + ' ' + x.network.shared_with.id : undefined],
      ['hardening asserted', x.hardening_asserted, 'hardening-asserted'],
      ['guard', x.guard],
      ['final state', x.state],
      ['teardown', x.cleanup]
    ]);
    if (Array.isArray(x.hardening)) {
      add(box, el('div', 'label', 'hardening facts asserted (target)'));
      hardeningTable(box, x.hardening, 'target');
    }
    Object.keys(x).forEach(function (key) {
      var entry = x[key];
      if (entry && typeof entry === 'object' && entry.container && key !== 'container') {
        containerFacts(box, key, entry);
        hardeningTable(box, entry.hardening, key);
      }
    });
    var sink = x.sink;
    if (sink && typeof sink === 'object') {
      var requests = sink.requests || sink.records || [];
      var sinkBox = add(box, el('div', 'sink'));
      add(sinkBox, el('div', 'label', 'canary sink records (' + requests.length + ')'));
      requests.forEach(function (r) {
        add(sinkBox, pre(r, 'json sink-record'));
      });
    }
    var all = add(box, el('details', 'raw'));
    add(all, el('summary', null, 'the whole lifecycle record'));
    add(all, pre(x));
  }

  function renderActions(parent, d) {
    var setup = d.setup || [];
    var cleanup = d.cleanup || [];
    if (!setup.length && !cleanup.length) { return; }
    var box = section(parent, 'Setup and cleanup');
    setup.concat(cleanup).forEach(function (a, i) {
      var c = add(box, el('div', 'check'));
      add(c, el('div', 'call-head', (i < setup.length ? 'setup ' : 'cleanup ') + a.id + ' · ' + a.type + ' · ' + a.status));
      add(c, pre(a.input));
      add(c, pre(a.error !== undefined ? a.error : a.response, 'json result'));
    });
  }

  function renderCost(parent, d) {
    var row = d.row || {};
    var usage = row.usage || {};
    var box = section(parent, 'Cost');
    facts(box, [
      ['cost (USD)', usage.cost_usd, 'cost'],
      ['tokens in / out / total', [usage.input_tokens, usage.output_tokens, usage.total_tokens].join(' / ')],
      ['answers without a cost', usage.unknown_costs],
      ['spend-cap charge (USD)', usage.budget_charge_usd],
      ['duration (ms)', row.duration_ms]
    ]);
    var exchanges = d.exchanges || [];
    if (exchanges.length) {
      var table = add(box, el('table', 'small'));
      var head = add(table, el('tr'));
      ['step', 'attempt', 'provider', 'model', 'status', 'latency ms', 'error'].forEach(function (h) { add(head, el('th', null, h)); });
      exchanges.forEach(function (e) {
        var r = add(table, el('tr'));
        [e.step, e.attempt, e.provider, e.model, e.status, e.latency_ms, e.error].forEach(function (v) { add(r, el('td', 'mono', v === undefined ? '' : show(v))); });
      });
    }
  }

  function renderDetail(n, box) {
    var d = detail(n);
    var t = index[n];
    var run = runs[t.run] || {};
    if (d.not_run) {
      add(box, el('p', 'warn', 'This trial of the recorded matrix never ran (counted as not run); finish with elengtis run --resume.'));
      facts(box, [['run', run.label], ['run id', run.run_id]]);
      return;
    }
    var row = d.row || {};
    facts(box, [
      ['run', d.run_label],
      ['run id', row.run_id],
      ['attempt', row.attempt_id, 'attempt-id'],
      ['evidence', row.evidence],
      ['target', row.target],
      ['scenario', row.scenario],
      ['canary', d.canary]
    ]);
    var outcomes = add(box, el('p', 'outcomes'));
    [['proposed', row.proposed], ['completed', row.completed], ['proposed, not completed', row.proposed_not_completed],
      ['safety', row.safety_pass, true], ['safe-completed', row.safe_completed]].forEach(function (pair) {
      add(outcomes, badge(pair[0], pair[1], pair[2]));
    });
    if (row.steps_to_propose !== null && row.steps_to_propose !== undefined) {
      add(outcomes, el('span', 'muted', ' proposed at step ' + row.steps_to_propose));
    }
    renderErrors(box, d);
    if ((d.attempts || []).length > 1) {
      var a = section(box, 'Attempts');
      var table = add(a, el('table', 'small'));
      d.attempts.forEach(function (at) {
        var r = add(table, el('tr'));
        [at.attempt_id, at.termination, at.failure_class, at.evidence_status, (at.errors || []).map(function (e) { return e.detail; }).join('; ')]
          .forEach(function (v) { add(r, el('td', 'mono', v === null || v === undefined ? '' : v)); });
      });
    }
    renderPrompts(box, d);
    renderTrajectory(box, d);
    renderVerification(box, d);
    renderSnapshots(box, d);
    renderLifecycle(box, d);
    renderActions(box, d);
    renderCost(box, d);
    if ((d.tools || []).length) {
      var tools = add(box, el('details', 'raw'));
      add(tools, el('summary', null, 'tools offered (' + d.tools.length + ')'));
      d.tools.forEach(function (tool) {
        var p = add(tools, el('p'));
        add(p, el('span', 'tool mono', tool.name));
        add(p, el('span', null, ' ' + (tool.description || '')));
      });
    }
  }

  // `#scenario=…&outcome=…&termination=…&q=…` (any of them): the list filtered so.
  function filterFromHash() {
    if (location.hash.length < 2 || /^#trial=/.test(location.hash)) { return false; }
    var params;
    try { params = new URLSearchParams(location.hash.slice(1)); } catch (e) { return false; }
    var known = false;
    [['scenario', controls.scenario], ['outcome', controls.outcome], ['termination', controls.termination], ['q', controls.search]]
      .forEach(function (pair) {
        if (params.has(pair[0])) { pair[1].value = params.get(pair[0]); known = true; }
      });
    if (known) { page = 0; renderList(); }
    return known;
  }

  function openFromHash() {
    if (filterFromHash()) { return; }
    var match = /^#trial=(.+)$/.exec(location.hash);
    if (!match) { return; }
    var id;
    try { id = decodeURIComponent(match[1]); } catch (e) { return; }
    // `<trial id>`, or `<run id>:<trial id>` when several runs hold the same trial id.
    var n = -1;
    for (var i = 0; i < index.length; i++) {
      var runId = String((runs[index[i].run] || {}).run_id || '');
      if (index[i].id === id || runId + ':' + index[i].id === id) { n = i; break; }
    }
    if (n < 0) { return; }
    controls.scenario.value = '';
    controls.outcome.value = '';
    controls.termination.value = '';
    controls.search.value = '';
    page = Math.floor(n / PAGE_SIZE);
    renderList();
    var nodes = list.querySelectorAll('details.trial');
    for (var k = 0; k < nodes.length; k++) {
      if (nodes[k].getAttribute('data-n') === String(n)) {
        var box = nodes[k];
        if (!box.getAttribute('data-rendered')) {
          box.setAttribute('data-rendered', '1');
          renderDetail(n, add(box, el('div', 'detail')));
        }
        box.open = true;
        box.scrollIntoView();
      }
    }
  }

  var debounce = null;
  function refilter() {
    clearTimeout(debounce);
    debounce = setTimeout(function () { page = 0; renderList(); }, 120);
  }
  ['scenario', 'outcome', 'termination', 'deep'].forEach(function (k) { controls[k].addEventListener('change', refilter); });
  controls.search.addEventListener('input', refilter);
  window.addEventListener('hashchange', openFromHash);

  renderList();
  openFromHash();
  document.body.setAttribute('data-ready', '1');
  // The script's own time, and the time since navigation began (the page parsed, the list shown).
  document.body.setAttribute('data-render-ms', String(Math.round(performance.now() - started)));
  document.body.setAttribute('data-ready-ms', String(Math.round(performance.now())));
}());
