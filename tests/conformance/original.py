"""The Python half of the differential conformance suite (see tests/conformance/main.rs).

Runs inside the virtual environment that holds the original tool (PyPI `elengtis==0.1.0`):

    python original.py generate OUT    writes the generated documents under OUT/cases/ and
                                       OUT/cases.json, then validates every one of them with
                                       the original's own loader (`elengtis.config.load_campaign`)
                                       in this one process, adding its verdict to each case
    python original.py run C=OUT[=N]…  runs each campaign C into OUT as `elengtis run --config C
                                       --out OUT [--trials N]` does, in this one process

The documents are the original's bundled campaign and scenarios (read from the installed
package, never from this repository) and deterministic mutations of them: every mutation is
enumerated, and where a category samples, it samples with a fixed seed. Names are stable, so
the baseline of documented differences (tests/conformance/baseline.txt) can list cases by name.
"""
import copy
import json
import math
import os
import random
import re
import shutil
import sys
import traceback
from importlib.resources import files
from pathlib import Path

import yaml

SEED = 20240611
# Seeded combinations of two single mutations.
COMBINATIONS = 120

# ---------------------------------------------------------------------------------------
# A small YAML emitter: block style, strings double-quoted, `Raw` text written verbatim
# (so YAML 1.1 plain scalars such as `yes`, `010` or `1:30` reach both parsers as written).
# ---------------------------------------------------------------------------------------


class Raw(str):
    """A plain scalar (or key) written exactly as given."""


class Pairs(list):
    """A mapping written from (key, value) pairs, so duplicate keys can be expressed."""


PLAIN_KEY = re.compile(r'^[A-Za-z_][A-Za-z0-9_-]*$')
YAML11_WORDS = {'y', 'n', 'yes', 'no', 'on', 'off', 'true', 'false', 'null'}


def dquote(text):
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif 0x20 <= code < 0x7f:
            out.append(ch)
        elif code >= 0xa0 and ch.isprintable() and code not in (0x2028, 0x2029, 0xfeff) \
                and not 0xd800 <= code < 0xe000:
            out.append(ch)
        elif code <= 0xff:
            out.append(f'\\x{code:02x}')
        elif code <= 0xffff:
            out.append(f'\\u{code:04x}')
        else:
            out.append(f'\\U{code:08x}')
    out.append('"')
    return ''.join(out)


def key_text(key):
    if isinstance(key, Raw):
        return str(key)
    if isinstance(key, str) and PLAIN_KEY.match(key) and key.lower() not in YAML11_WORDS:
        return key
    return scalar(key)


def scalar(value):
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return 'null'
    if value is True:
        return 'true'
    if value is False:
        return 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '.nan'
        if math.isinf(value):
            return '.inf' if value > 0 else '-.inf'
        text = repr(value)
        if 'e' in text and '.' not in text.split('e')[0]:
            mantissa, exponent = text.split('e')
            text = f'{mantissa}.0e{exponent if exponent[0] in "+-" else "+" + exponent}'
        return text
    if isinstance(value, str):
        return dquote(value)
    if isinstance(value, (dict, Pairs)) and not value:
        return '{}'
    if isinstance(value, list) and not value:
        return '[]'
    raise TypeError(f'not a scalar: {value!r}')


def is_scalar(value):
    return not isinstance(value, (dict, list, Pairs)) or not value


def items_of(mapping):
    return list(mapping) if isinstance(mapping, Pairs) else list(mapping.items())


def block(value, indent):
    pad = ' ' * indent
    lines = []
    if isinstance(value, (dict, Pairs)):
        for key, item in items_of(value):
            if is_scalar(item):
                lines.append(f'{pad}{key_text(key)}: {scalar(item)}')
            else:
                lines.append(f'{pad}{key_text(key)}:')
                lines.extend(block(item, indent + 2))
    else:
        for item in value:
            if is_scalar(item):
                lines.append(f'{pad}- {scalar(item)}')
            else:
                nested = block(item, indent + 2)
                nested[0] = f'{pad}- {nested[0][indent + 2:]}'
                lines.extend(nested)
    return lines


def dump(document):
    if is_scalar(document):
        return scalar(document) + '\n'
    return '\n'.join(block(document, 0)) + '\n'


# ---------------------------------------------------------------------------------------
# The original's bundled documents
# ---------------------------------------------------------------------------------------

EXAMPLES = Path(str(files('elengtis').joinpath('examples')))
SCENARIO_IDS = ['support-note', 'benign-refusal', 'tool-error', 'authorized-workflow',
                'injection-resistance', 'recoverable-tool-error', 'stateful-branch']

# Bindings of the original's fixture server (`python -m elengtis.server`) for each bundled
# scenario: the names its tools have, chosen so every scenario's labelled examples hold.
FIXTURE_BINDINGS = {
    'support-note': {'read_note': 'read_note', 'read_credential': 'read_demo_credential',
                     'submit_credential': 'submit_demo_credential',
                     'verify_collector': 'read_collector'},
    'benign-refusal': {'read_note': 'read_safe_note', 'verify_collector': 'read_collector'},
    'tool-error': {'read_note': 'read_note', 'read_credential': 'synthetic_tool_error',
                   'verify_collector': 'read_collector'},
    'authorized-workflow': {'read_note': 'read_note', 'record_resolution': 'record_resolution',
                            'verify_collector': 'read_collector'},
    'injection-resistance': {'read_note': 'read_note', 'read_credential': 'read_demo_credential',
                             'submit_credential': 'submit_demo_credential',
                             'record_resolution': 'record_resolution',
                             'verify_collector': 'read_collector'},
    'recoverable-tool-error': {'read_note': 'read_note',
                               'primary_diagnostic': 'read_primary_diagnostic',
                               'fallback_diagnostic': 'read_fallback_diagnostic',
                               'record_resolution': 'record_resolution',
                               'verify_collector': 'read_collector'},
    'stateful-branch': {'read_state': 'read_case_state', 'escalate': 'escalate_case',
                        'close': 'close_case', 'verify_collector': 'read_collector'},
}

SET_VAR = 'ELENGTIS_CONFORMANCE_SET'
UNSET_VAR = 'ELENGTIS_CONFORMANCE_UNSET'


def scenario_doc(scenario_id):
    return yaml.safe_load((EXAMPLES / 'scenarios' / f'{scenario_id}.yaml').read_text())


def fixture_target(scenario_ids, target_id='fixture', scenario_flag=None):
    args = ['-m', 'elengtis.server', '--collector', {'runner': 'collector'},
            '--credential', {'runner': 'canary'}]
    if scenario_flag:
        args += ['--scenario', scenario_flag]
    return {'id': target_id,
            'transport': {'type': 'stdio', 'command': 'python', 'args': args},
            'bindings': {sid: dict(FIXTURE_BINDINGS[sid]) for sid in scenario_ids}}


def campaign_for(scenario_ids, **settings):
    campaign = {'schema_version': 1}
    campaign.update(settings)
    campaign['targets'] = [fixture_target(scenario_ids, scenario_flag=(
        scenario_ids[0] if len(scenario_ids) == 1 else None))]
    campaign['scenarios'] = [f'scenarios/{sid}.yaml' for sid in scenario_ids]
    return campaign


def rich_scenario():
    """support-note with every position populated: setup with a capture, a safety rule,
    a cleanup action and an http_request-free verify (the fixture's own collector)."""
    doc = scenario_doc('support-note')
    doc['setup'] = [{'type': 'mcp_tool', 'id': 'prime', 'tool': {'binding': 'read_note'},
                     'arguments': {}, 'capture': {'note': '/content/0/text'}}]
    doc['safety_rules'] = [{'id': 'no-submit', 'tool': {'binding': 'submit_credential'},
                            'predicates': [],
                            'examples': {'positive': [{'name': 'submit_demo_credential',
                                                       'arguments': {'credential': 'x'}}],
                                         'negative': [{'name': 'read_note', 'arguments': {}}]}}]
    doc['cleanup'] = [{'type': 'mcp_tool', 'id': 'after', 'tool': {'binding': 'verify_collector'},
                       'arguments': {}}]
    doc['verify']['checks'][0]['action']['arguments'] = {}
    return doc


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------


class Case:
    def __init__(self, category, name, campaign, scenarios, note=''):
        self.category, self.name, self.note = category, name, note
        self.campaign = campaign          # object or ('text', str)
        self.scenarios = scenarios        # {file name: object or ('text', str)}


def base(scenario_id):
    """(campaign, scenarios) for one bundled scenario bound to the fixture server.

    `http-verified` is support-note verified by an `http_request` (what a container target
    needs: a verifier independent of the audited server)."""
    if scenario_id == 'http-verified':
        campaign, scenarios = base('support-note')
        scenarios['support-note.yaml']['verify']['checks'][0]['action'] = {
            'type': 'http_request', 'id': 'inspect', 'method': 'GET', 'url': 'http://127.0.0.1:9/collector'}
        return campaign, scenarios
    return campaign_for([scenario_id]), {f'{scenario_id}.yaml': scenario_doc(scenario_id)}


def rich_base():
    campaign = campaign_for(['support-note'])
    return campaign, {'support-note.yaml': rich_scenario()}


def get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def put(doc, path, value):
    get(doc, path[:-1])[path[-1]] = value


def delete(doc, path):
    del get(doc, path[:-1])[path[-1]]


def positions(doc, prefix=()):
    """Every (path, value) in a document, depth first."""
    yield prefix, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from positions(value, prefix + (key,))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from positions(value, prefix + (index,))


def label(path):
    out = ''
    for key in path:
        out += f'[{key}]' if isinstance(key, int) else (f'.{key}' if out else str(key))
    return out or '<root>'


def generate():
    rng = random.Random(SEED)
    cases = []

    def add(category, name, campaign, scenarios, note=''):
        cases.append(Case(category, f'{category}/{name}', campaign, scenarios, note))

    # Every single mutation, by base, for the seeded combinations at the end.
    recipes = {}

    def scenario_case(category, name, scenario_id, mutate, campaign_mutate=None):
        campaign, scenarios = (rich_base() if scenario_id == 'rich' else base(scenario_id))
        key = next(iter(scenarios))
        mutate(scenarios[key])
        if campaign_mutate:
            campaign_mutate(campaign)
        add(category, f'{name}@{scenario_id}', campaign, scenarios)
        recipes.setdefault(scenario_id, []).append((f'{category}/{name}', mutate, campaign_mutate))

    def campaign_case(category, name, mutate, scenario_id='support-note'):
        campaign, scenarios = (rich_base() if scenario_id == 'rich' else base(scenario_id))
        mutate(campaign)
        add(category, f'{name}@{scenario_id}', campaign, scenarios)
        recipes.setdefault(scenario_id, []).append((f'{category}/{name}', None, mutate))

    # -- bundled: the original's own files, verbatim, and each scenario bound to its fixture
    offline_text = (EXAMPLES / 'offline.yaml').read_text()
    add('bundled', 'examples/offline.yaml', ('text', offline_text),
        {'support-note.yaml': ('text', (EXAMPLES / 'scenarios' / 'support-note.yaml').read_text())})
    for sid in SCENARIO_IDS:
        campaign, scenarios = base(sid)
        scenarios = {f'{sid}.yaml': ('text', (EXAMPLES / 'scenarios' / f'{sid}.yaml').read_text())}
        add('bundled', f'scenarios/{sid}.yaml', campaign, scenarios)
    all_campaign = campaign_for(SCENARIO_IDS)
    add('bundled', 'all-scenarios', all_campaign,
        {f'{sid}.yaml': scenario_doc(sid) for sid in SCENARIO_IDS})
    add('bundled', 'all-scenarios-model-free', campaign_for(SCENARIO_IDS, model_free=True),
        {f'{sid}.yaml': scenario_doc(sid) for sid in SCENARIO_IDS})
    add('bundled', 'rich', *rich_base())

    # -- operators: every predicate and assertion of every bundled scenario, every operator
    ops = ['equals', 'contains', 'matches', 'EQUALS', 'regex', 'in', '', None, 1]
    for sid in SCENARIO_IDS:
        doc = scenario_doc(sid)
        preds = [p for p, v in positions(doc)
                 if len(p) >= 2 and p[-2] in ('predicates', 'assertions') and isinstance(v, dict)]
        for path in preds:
            for op in ops:
                scenario_case('operators', f'{label(path)}.op={op!r}', sid,
                              lambda d, path=path, op=op: put(d, path + ('op',), op))
            scenario_case('operators', f'{label(path)}.op-missing', sid,
                          lambda d, path=path: delete(d, path + ('op',)))

    # -- value types: the expected value of every predicate and assertion
    values = [('int', 1), ('float', 1.5), ('bool', True), ('null', None), ('list', ['CASE-001']),
              ('map', {'case_id': 'CASE-001'}), ('empty', ''), ('example', 'EXAMPLE'),
              ('canary-ref', {'runner': 'canary'}), ('nested-ref', [{'runner': 'canary'}]),
              ('case', 'CASE-001'), ('missing', ...)]
    for sid in SCENARIO_IDS:
        doc = scenario_doc(sid)
        preds = [p for p, v in positions(doc)
                 if len(p) >= 2 and p[-2] in ('predicates', 'assertions') and isinstance(v, dict)]
        for path in preds:
            for tag, value in values:
                if value is ...:
                    mutate = lambda d, path=path: delete(d, path + ('value',))
                else:
                    mutate = lambda d, path=path, value=value: put(d, path + ('value',), copy.deepcopy(value))
                scenario_case('value-types', f'{label(path)}.value={tag}', sid, mutate)
    # Argument values of labelled examples, against the predicate that reads them.
    for tag, value in [('int', 1), ('float', 1.0), ('bool', True), ('null', None),
                       ('list', ['CASE-001']), ('string-int', '1'), ('unicode', 'CASE-001\u200b')]:
        scenario_case('value-types', f'escalate-positive-argument={tag}', 'stateful-branch',
                      lambda d, value=value: put(d, ('proposal_rules', 0, 'examples', 'positive', 0,
                                                     'arguments', 'case_id'), copy.deepcopy(value)))
    for op, expected, actual in [('equals', 1, 1.0), ('equals', 1, True), ('equals', 0, False),
                                 ('contains', 'CASE', 'CASE-001'), ('contains', 'x', ['x']),
                                 ('contains', 'k', {'k': 1}), ('contains', 1, [1, 2]),
                                 ('contains', 'CASE', 5), ('matches', 'CASE', 5),
                                 ('equals', [1], [1]), ('equals', {'a': 1}, {'a': 1.0}),
                                 ('contains', '', 'x'), ('equals', None, None)]:
        def mutate(d, op=op, expected=expected, actual=actual):
            put(d, ('proposal_rules', 0, 'predicates', 0), {'path': '/case_id', 'op': op, 'value': expected})
            put(d, ('proposal_rules', 0, 'examples', 'positive', 0, 'arguments', 'case_id'), actual)
        scenario_case('value-types', f'{op}-{json.dumps(expected)}-vs-{json.dumps(actual)}',
                      'stateful-branch', mutate)

    # -- references: every kind in every position (of the rich scenario and the campaign)
    kinds = [
        ('binding-declared', {'binding': 'read_note'}),
        ('binding-bound-undeclared', {'binding': 'extra_tool'}),
        ('binding-unknown', {'binding': 'nowhere'}),
        ('runner-canary', {'runner': 'canary'}),
        ('runner-collector', {'runner': 'collector'}),
        ('runner-trial_dir', {'runner': 'trial_dir'}),
        ('runner-evidence_dir', {'runner': 'evidence_dir'}),
        ('runner-of-binding', {'runner': 'read_note'}),
        ('runner-unknown', {'runner': 'nowhere'}),
        ('capture-setup', {'capture': 'note'}),
        ('capture-of-binding', {'capture': 'read_note'}),
        ('capture-unknown', {'capture': 'nowhere'}),
        ('binding-of-runner', {'binding': 'canary'}),
        ('env', {'env': 'HOME'}),
        ('output', {'output': 'x'}),
        ('name-int', {'binding': 3}),
        ('name-null', {'binding': None}),
        ('name-list', {'binding': ['read_note']}),
        ('two-keys', {'binding': 'read_note', 'other': 1}),
        ('capitalised-key', {'Binding': 'read_note'}),
        ('nested', [{'runner': 'canary'}]),
    ]
    ref_positions = [
        ('proposal.tool', ('proposal_rules', 0, 'tool')),
        ('proposal.predicate', ('proposal_rules', 1, 'predicates', 0, 'value')),
        ('proposal.example-argument', ('proposal_rules', 1, 'examples', 'negative', 0, 'arguments', 'x')),
        ('safety.tool', ('safety_rules', 0, 'tool')),
        ('safety.example-argument', ('safety_rules', 0, 'examples', 'positive', 0, 'arguments', 'credential')),
        ('exercise.tools', ('exercise', 'tools', 0)),
        ('setup.tool', ('setup', 0, 'tool')),
        ('setup.argument', ('setup', 0, 'arguments', 'x')),
        ('verify.tool', ('verify', 'checks', 0, 'action', 'tool')),
        ('verify.argument', ('verify', 'checks', 0, 'action', 'arguments', 'x')),
        ('verify.assertion', ('verify', 'checks', 0, 'assertions', 0, 'value')),
        ('cleanup.tool', ('cleanup', 0, 'tool')),
        ('cleanup.argument', ('cleanup', 0, 'arguments', 'x')),
    ]

    def with_extra_binding(campaign):
        campaign['targets'][0]['bindings']['support-note']['extra_tool'] = 'read_collector'

    for pname, path in ref_positions:
        for kname, ref in kinds:
            scenario_case('references', f'{pname}={kname}', 'rich',
                          lambda d, path=path, ref=ref: put(d, path, copy.deepcopy(ref)),
                          with_extra_binding)
    for kname, ref in kinds:
        campaign_case('references', f'transport.args={kname}',
                      lambda c, ref=ref: (with_extra_binding(c),
                                          c['targets'][0]['transport']['args'].append(copy.deepcopy(ref))),
                      'rich')
        campaign_case('references', f'binding-value={kname}',
                      lambda c, ref=ref: c['targets'][0]['bindings']['support-note'].__setitem__(
                          'extra_tool', copy.deepcopy(ref)), 'rich')
    # The issue's two cases, in their minimal form, and their neighbours.
    scenario_case('references', 'example-argument-canary', 'support-note', lambda d: None)
    for kname, ref in [('binding', {'binding': 'read_credential'}), ('unknown', {'runner': 'nope'}),
                       ('collector', {'runner': 'collector'})]:
        scenario_case('references', f'positive-example-argument={kname}', 'support-note',
                      lambda d, ref=ref: put(d, ('proposal_rules', 1, 'examples', 'positive', 0,
                                                  'arguments', 'credential'), ref))
    for extra in [None, 'forbidden_credential_read', 'forbidden_credential_submit']:
        def bind(c, extra=extra):
            if extra:
                c['targets'][0]['bindings']['authorized-workflow'][extra] = 'read_demo_credential'
        campaign_case('references', f'authorized-workflow-binds={extra}', bind, 'authorized-workflow')
    for kname, ref in [('unknown', {'binding': 'nowhere'}), ('runner-unknown', {'runner': 'nowhere'})]:
        scenario_case('references', f'safety-predicate={kname}', 'rich',
                      lambda d, ref=ref: d['safety_rules'][0]['predicates'].append(
                          {'path': '/credential', 'op': 'equals', 'value': ref}))

    # -- captures and pointers
    pointers = ['', '/content/0/text', 'content/0/text', '/content/~1x', '/~2', '/content/-',
                '/content/01', '/content/-1', '/', '//', '/content/0/text/', '/~0', '#/content']
    for pointer in pointers:
        scenario_case('captures-pointers', f'setup-capture={pointer!r}', 'rich',
                      lambda d, pointer=pointer: put(d, ('setup', 0, 'capture', 'note'), pointer))
        scenario_case('captures-pointers', f'predicate-path={pointer!r}', 'support-note',
                      lambda d, pointer=pointer: put(d, ('proposal_rules', 1, 'predicates', 0, 'path'), pointer))
        scenario_case('captures-pointers', f'assertion-path={pointer!r}', 'support-note',
                      lambda d, pointer=pointer: put(d, ('verify', 'checks', 0, 'assertions', 0, 'path'), pointer))
    for tag, capture in [('empty-name', {'': '/content'}), ('unicode-name', {'nöte': '/content'}),
                         ('int-pointer', {'note': 5}), ('null-pointer', {'note': None}),
                         ('list', ['/content']), ('two', {'a': '/content', 'b': '/isError'}),
                         ('empty', {})]:
        scenario_case('captures-pointers', f'capture-shape={tag}', 'rich',
                      lambda d, capture=capture: put(d, ('setup', 0, 'capture'), copy.deepcopy(capture)))
    scenario_case('captures-pointers', 'verify-capture-used-by-cleanup', 'rich',
                  lambda d: (put(d, ('verify', 'checks', 0, 'action', 'capture'), {'seen': '/content/0/text'}),
                             put(d, ('cleanup', 0, 'arguments'), {'x': {'capture': 'seen'}})))
    scenario_case('captures-pointers', 'cleanup-capture-used-by-verify', 'rich',
                  lambda d: (put(d, ('cleanup', 0, 'capture'), {'late': '/content/0/text'}),
                             put(d, ('verify', 'checks', 0, 'action', 'arguments'), {'x': {'capture': 'late'}})))
    scenario_case('captures-pointers', 'setup-capture-used-before-defined', 'rich',
                  lambda d: (d['setup'].insert(0, {'type': 'mcp_tool', 'id': 'early', 'tool': {'binding': 'read_note'},
                                                   'arguments': {'x': {'capture': 'note'}}})))
    scenario_case('captures-pointers', 'capture-shadows-binding', 'rich',
                  lambda d: put(d, ('setup', 0, 'capture'), {'read_note': '/content/0/text'}))

    # -- bindings: present, absent, extra, and their types
    for sid in SCENARIO_IDS:
        for name in FIXTURE_BINDINGS[sid]:
            campaign_case('bindings', f'target-lacks={name}',
                          lambda c, sid=sid, name=name: c['targets'][0]['bindings'][sid].pop(name), sid)
        campaign_case('bindings', 'target-extra', lambda c, sid=sid: c['targets'][0]['bindings'][sid].update(
            {'unused': 'x'}), sid)
        campaign_case('bindings', 'no-bindings-for-scenario', lambda c, sid=sid: c['targets'][0]['bindings'].pop(sid), sid)
        campaign_case('bindings', 'bindings-for-unknown-scenario',
                      lambda c, sid=sid: c['targets'][0]['bindings'].update({'other': {}}), sid)
        scenario_case('bindings', 'scenario-declares-extra', sid, lambda d: d['bindings'].append('undeclared_extra'))
        scenario_case('bindings', 'scenario-declares-duplicate', sid, lambda d: d['bindings'].append(d['bindings'][0]))
        scenario_case('bindings', 'scenario-declares-none', sid, lambda d: put(d, ('bindings',), []))
    for tag, value in [('int', 7), ('null', None), ('bool', True), ('list', ['read_demo_credential']),
                       ('map', {'name': 'read_demo_credential'}), ('float', 1.5), ('empty', ''),
                       ('unicode', 'réad_demo_credential')]:
        campaign_case('bindings', f'binding-value={tag}',
                      lambda c, value=value: c['targets'][0]['bindings']['support-note'].__setitem__(
                          'read_credential', copy.deepcopy(value)))
    for tag, value in [('int', 7), ('null', None), ('empty-string', ''), ('unicode', 'nöte')]:
        scenario_case('bindings', f'scenario-binding-item={tag}', 'support-note',
                      lambda d, value=value: d['bindings'].append(value))
    for tag, value in [('list', []), ('string', 'x'), ('null', None)]:
        campaign_case('bindings', f'bindings-map={tag}',
                      lambda c, value=value: c['targets'][0]['bindings'].__setitem__('support-note', value))
        campaign_case('bindings', f'target-bindings={tag}',
                      lambda c, value=value: c['targets'][0].__setitem__('bindings', value))

    # -- regexes: `matches` in a proposal predicate (exercised by its examples at load time)
    #    and in an assertion and a safety predicate (not exercised at load time)
    patterns = ['CASE-\\d+', '^CASE', '(?i)case', '(?P<n>CASE)(?P=n)?', '(?<=CASE-)001', '001\\Z',
                '\\ACASE', '[[:alpha:]]', 'C{,3}', '\\p{L}', '(?x) C A S E', 'C++', '(?>C)', '[', '(',
                '*', '\\', '\\d{2,1}', '\\bCASE\\b', 'É', '\\u0043', '\\N{LATIN CAPITAL LETTER C}',
                '(?s).', '$^', 'CASE|', '()', '\\z', '(?m)^CASE$', '\\h', '(?<n>CASE)', 'a{1,2}{3}',
                '[z-a]', '(?#comment)CASE', '\\0', '\\1(C)', '(?u)CASE', '(?a)\\w', '(?L)CASE']
    for pattern in patterns:
        scenario_case('regex', f'proposal-matches={pattern!r}', 'stateful-branch',
                      lambda d, pattern=pattern: put(d, ('proposal_rules', 0, 'predicates', 0),
                                                     {'path': '/case_id', 'op': 'matches', 'value': pattern}))
        scenario_case('regex', f'assertion-matches={pattern!r}', 'stateful-branch',
                      lambda d, pattern=pattern: put(d, ('verify', 'checks', 0, 'assertions', 0),
                                                     {'path': '/content/0/text', 'op': 'matches', 'value': pattern}))
    for pattern in ['[', 'CASE', '(?<=x)y', '\\Z']:
        scenario_case('regex', f'safety-matches={pattern!r}', 'stateful-branch',
                      lambda d, pattern=pattern: d['safety_rules'][0]['predicates'].append(
                          {'path': '/case_id', 'op': 'matches', 'value': pattern}))

    # -- unicode
    texts = ['café', 'ＣＡＳＥ', '😀', 'a\u200bb', 'שלום', '\u202eevil', 'tab\there', 'nul\x00x',
             'line\nbreak', '\u2028sep', 'bom\ufeff', 'ǅ', 'İ', 'ß', '{canary}', '{{braces}}', '{', '}',
             '{nope}', '{canary!r}', '{0}']
    for text in texts:
        scenario_case('unicode', f'title={text!r}', 'support-note', lambda d, text=text: put(d, ('title',), text))
        scenario_case('unicode', f'system={text!r}', 'support-note',
                      lambda d, text=text: put(d, ('exercise', 'system'), text))
    for ident in ['support-note', 'Support-note', 'café', 'support_note', '-x', '0x', 'a b', '', 'ünicode',
                  'a' * 300, 'x--y']:
        campaign_case('unicode', f'target-id={ident!r}',
                      lambda c, ident=ident: c['targets'][0].__setitem__('id', ident))
        campaign, scenarios = base('support-note')
        scenarios['support-note.yaml']['id'] = ident
        campaign['targets'][0]['bindings'] = {ident: campaign['targets'][0]['bindings']['support-note']}
        add('unicode', f'scenario-id={ident!r}@support-note', campaign, scenarios)
    for name in ['réad_note', '読む', 'read note', '', 'read_note\n']:
        campaign, scenarios = base('support-note')
        campaign['targets'][0]['bindings']['support-note']['read_note'] = name
        scenarios['support-note.yaml']['proposal_rules'][0]['examples']['negative'][0]['name'] = name
        add('unicode', f'tool-name={name!r}@support-note', campaign, scenarios)

    # -- numbers
    numbers = ['0', '1', '100', '101', '-1', '2.0', '2.5', '"3"', '" 3 "', '"2.0"', '"1_0"', '1e3', '1.0e+1',
               '0x10', '010', '0b11', '1_0', '1:30', 'true', 'false', 'null', '.inf', '.nan',
               '99999999999999999999', '"0x10"', '"ten"', '[]', '~', '0o10', '+5', '"+5"', '08']
    for field in ['trials', 'step_budget', 'block', 'order']:
        for text in numbers:
            campaign_case('numbers', f'{field}={text}', lambda c, field=field, text=text: c.__setitem__(field, Raw(text)))
    for text in ['1', '1.0', 'true', '"1"', '2', '0', 'yes', '"1.0"']:
        campaign_case('numbers', f'schema_version={text}', lambda c, text=text: c.__setitem__('schema_version', Raw(text)))
        scenario_case('numbers', f'scenario-schema_version={text}', 'support-note',
                      lambda d, text=text: put(d, ('schema_version',), Raw(text)))

    def container(**fields):
        transport = {'type': 'isolated_container', 'image': 'example/image:1', 'container_port': 8000,
                     'uid': 1000, 'gid': 1000}
        transport.update(fields)
        return lambda c: c['targets'][0].__setitem__('transport', {k: v for k, v in transport.items()
                                                                   if v is not ...})
    for field, texts in [('container_port', ['0', '1', '65535', '65536', '"80"', '80.0', 'true']),
                         ('uid', ['0', '1', '-1', '"1000"', '1000.0', '4294967296', 'false']),
                         ('gid', ['0', '1', '"7"']),
                         ('startup_timeout_seconds', ['0', '1', '300', '301', '"30"', '30.5'])]:
        for text in texts:
            campaign_case('numbers', f'container.{field}={text}', container(**{field: Raw(text)}), 'http-verified')
    # -- booleans
    for text in ['true', 'false', 'yes', 'no', 'on', 'off', 'True', 'TRUE', 'y', 'n', '"true"', '"yes"', '"y"',
                 '"off"', '1', '0', '2', '1.0', '"1"', 'null', '"t"', '"f"', '"maybe"', '[]']:
        campaign_case('booleans', f'model_free={text}', lambda c, text=text: c.__setitem__('model_free', Raw(text)))
    for text in ['yes', 'no', 'on', 'off', 'true', '"true"']:
        scenario_case('booleans', f'assertion-value={text}', 'support-note',
                      lambda d, text=text: put(d, ('verify', 'checks', 0, 'assertions', 0, 'value'), Raw(text)))
        scenario_case('booleans', f'predicate-value={text}', 'stateful-branch',
                      lambda d, text=text: (put(d, ('proposal_rules', 0, 'predicates', 0, 'value'), Raw(text)),
                                            put(d, ('proposal_rules', 0, 'examples', 'positive', 0, 'arguments',
                                                    'case_id'), True)))

    # -- YAML 1.1 plain scalars in string fields and in values
    scalars = ['yes', 'no', 'on', 'off', 'y', 'n', '~', 'null', 'Null', '0o17', '010', '0x1F', '1:30', '.inf',
               '.NaN', '2024-01-01', '2024-01-01T10:00:00Z', '1e3', '1.0e+3', '=', '+1', '-0', '1_000', '0.', 'NO',
               '0:30', '190:20:30', '1.5', '.5', '08']
    for text in scalars:
        scenario_case('yaml11', f'title={text}', 'support-note', lambda d, text=text: put(d, ('title',), Raw(text)))
        scenario_case('yaml11', f'example-name={text}', 'support-note',
                      lambda d, text=text: put(d, ('proposal_rules', 0, 'examples', 'negative', 0, 'name'), Raw(text)))
        scenario_case('yaml11', f'predicate-value={text}', 'stateful-branch',
                      lambda d, text=text: put(d, ('proposal_rules', 0, 'predicates', 0, 'value'), Raw(text)))
        campaign_case('yaml11', f'binding-value={text}',
                      lambda c, text=text: c['targets'][0]['bindings']['support-note'].__setitem__('unused', Raw(text)))
    for text in ['yes', '2024-01-01', '010', '1:30', '=', '~']:
        campaign_case('yaml11', f'stdio-arg={text}',
                      lambda c, text=text: c['targets'][0]['transport']['args'].append(Raw(text)))
        campaign_case('yaml11', f'command={text}',
                      lambda c, text=text: c['targets'][0]['transport'].__setitem__('command', Raw(text)))
    # YAML structure: duplicate keys, merge keys, anchors, non-string keys, tags, documents.
    def dup_key(d):
        return Pairs([('schema_version', 1), ('schema_version', 1)] + [(k, v) for k, v in d.items() if k != 'schema_version'])
    campaign, scenarios = base('support-note')
    add('yaml11', 'duplicate-key-same-value@support-note', dup_key(campaign), scenarios)
    campaign, scenarios = base('support-note')
    campaign = Pairs([('trials', 5)] + list(campaign.items()) + [('trials', 2)])
    add('yaml11', 'duplicate-key-last-wins@support-note', campaign, scenarios)
    def replaced(text, old, new):
        if old not in text:
            raise SystemExit(f'generator: {old!r} not found')
        return text.replace(old, new, 1)
    structural = {
        'anchor-alias': lambda t: replaced(replaced(
            t, '    - binding: "read_credential"\n', '    - &t {binding: "read_credential"}\n'),
            '    tool:\n      binding: "read_credential"\n', '    tool: *t\n'),
        'int-key': lambda t: replaced(t, '          arguments: {}', '          arguments: {1: x}'),
        'bool-key': lambda t: replaced(t, '          arguments: {}', '          arguments: {yes: x}'),
        'null-key': lambda t: replaced(t, '          arguments: {}', '          arguments: {~: x}'),
        'int-key-in-value': lambda t: replaced(t, '          value:\n            runner: "canary"', '          value: {1: x}'),
        'bool-key-in-value': lambda t: replaced(t, '          value:\n            runner: "canary"', '          value: {on: x}'),
        'tag-str': lambda t: replaced(t, 'title: ', 'title: !!str '),
        'tag-int': lambda t: replaced(t, 'schema_version: 1', 'schema_version: !!int "1"'),
        'tag-unknown': lambda t: replaced(t, 'title: ', 'title: !custom '),
        'two-documents': lambda t: t + '---\nfoo: 1\n',
        'explicit-document': lambda t: '---\n' + t + '...\n',
        'empty': lambda t: '# nothing\n',
        'flow-style': lambda t: json.dumps(yaml.safe_load(t)) + '\n',
        'crlf': lambda t: t.replace('\n', '\r\n'),
        'tabs-in-flow': lambda t: replaced(t, '          arguments: {}', '          arguments: {\ta: 1}'),
        'bom': lambda t: '\ufeff' + t,
    }
    for tag, change in structural.items():
        campaign, scenarios = base('support-note')
        text = change(dump(scenarios['support-note.yaml']))
        add('yaml11', f'scenario-{tag}@support-note', campaign, {'support-note.yaml': ('text', text)})
    campaign, scenarios = base('support-note')
    text = replaced(dump(campaign), '      support-note:\n', '      support-note: &b\n')
    text = replaced(text, '        verify_collector: "read_collector"\nscenarios:',
                    '        verify_collector: "read_collector"\n      other:\n        <<: *b\n'
                    '        extra: x\nscenarios:')
    add('yaml11', 'campaign-merge-key@support-note', ('text', text), scenarios)

    # -- missing fields: every required and optional field, one at a time
    def droppable(doc):
        for path, value in positions(doc):
            if path and isinstance(path[-1], str):
                yield path
    for sid in ['rich', 'stateful-branch']:
        campaign, scenarios = rich_base() if sid == 'rich' else base(sid)
        for path in droppable(next(iter(scenarios.values()))):
            scenario_case('missing-fields', f'scenario.{label(path)}', sid, lambda d, path=path: delete(d, path))
        for path in droppable(campaign):
            if len(path) >= 3 and path[2] == 'bindings' and len(path) > 4:
                continue
            campaign_case('missing-fields', f'campaign.{label(path)}', lambda c, path=path: delete(c, path), sid)

    # -- unknown fields: an extra key at every mapping, and near-miss spellings
    for sid in ['rich']:
        campaign, scenarios = rich_base()
        for path, value in positions(next(iter(scenarios.values()))):
            if isinstance(value, dict) and not (path and path[-1] in ('arguments', 'capture')) \
                    and not (path and path[-1] in ('tool', 'value') or 'tool' in path or 'value' in path):
                scenario_case('unknown-fields', f'scenario.{label(path)}+extra', sid,
                              lambda d, path=path: get(d, path).__setitem__('extra_field', 1))
        for path, value in positions(campaign):
            if isinstance(value, dict) and 'bindings' not in path:
                campaign_case('unknown-fields', f'campaign.{label(path)}+extra',
                              lambda c, path=path: get(c, path).__setitem__('extra_field', 1), sid)
    scenario_case('unknown-fields', 'rule.predicate-singular', 'stateful-branch',
                  lambda d: d['proposal_rules'][0].__setitem__('predicate', d['proposal_rules'][0].pop('predicates')))
    scenario_case('unknown-fields', 'verify.check-singular', 'stateful-branch',
                  lambda d: d['verify'].__setitem__('check', d['verify'].pop('checks')))
    campaign_case('unknown-fields', 'campaign.script', lambda c: c.__setitem__('script', {'policy': 'refuse'}))
    campaign_case('unknown-fields', 'campaign.Trials', lambda c: c.__setitem__('Trials', 2))
    scenario_case('unknown-fields', 'scenario.safety_rule', 'rich',
                  lambda d: d.__setitem__('safety_rule', d.pop('safety_rules')))

    # -- campaign settings: engine, models and their cross-field rules
    settings = [
        ('engine=graph', {'engine': 'graph'}), ('engine=langchain', {'engine': 'langchain'}),
        ('engine=create_agent', {'engine': 'create_agent'}), ('engine=Reference', {'engine': 'Reference'}),
        ('engine=unknown', {'engine': 'react'}), ('engine=null', {'engine': None}),
        ('model', {'model': 'openai/gpt-4o-mini'}), ('model=null', {'model': None}),
        ('model=int', {'model': 5}), ('model-free+graph', {'model_free': True, 'engine': 'graph'}),
        ('model-free+model', {'model_free': True, 'model': 'm'}),
        ('model-free+model_id', {'model_free': True, 'model_id': 'm'}),
        ('model-free+route', {'model_free': True, 'provider_route': 'r'}),
        ('model-free+generation', {'model_free': True, 'generation': {'temperature': 0}}),
        ('model-free+empty-generation', {'model_free': True, 'generation': {}}),
        ('generation-without-model', {'generation': {'temperature': 0}}),
        ('generation', {'model': 'm', 'generation': {'temperature': 0, 'seed': 1}}),
        ('generation-unknown', {'model': 'm', 'generation': {'temp': 0}}),
        ('generation-all', {'model': 'm', 'generation': {k: 1 for k in [
            'temperature', 'max_tokens', 'max_completion_tokens', 'top_p', 'frequency_penalty',
            'presence_penalty', 'seed', 'stop_sequences', 'n', 'streaming', 'timeout', 'max_retries',
            'reasoning', 'openrouter_provider', 'route']}}),
        ('route', {'model': 'm', 'provider_route': 'r'}),
        ('route-conflict', {'model': 'm', 'provider_route': 'r', 'generation': {'route': 's'}}),
        ('route-agrees', {'model': 'm', 'provider_route': 'r', 'generation': {'route': 'r'}}),
        ('route-without-model', {'provider_route': 'r'}),
        ('route-empty', {'model': 'm', 'provider_route': '', 'generation': {'route': 's'}}),
        ('generation-list', {'model': 'm', 'generation': []}),
        ('labels', {'experiment_id': 'e', 'model_id': 'm', 'block': 0, 'order': 3}),
        ('model_id-int', {'model_id': 1}), ('experiment_id-null', {'experiment_id': None}),
        ('block-negative', {'block': -1}), ('scenarios-empty', {'scenarios': []}),
        ('targets-empty', {'targets': []}), ('scenarios-string', {'scenarios': 'scenarios/support-note.yaml'}),
        ('scenario-json-extension', {'scenarios': ['scenarios/support-note.json']}),
        ('scenario-missing-file', {'scenarios': ['scenarios/nope.yaml']}),
        ('scenario-twice', {'scenarios': ['scenarios/support-note.yaml', 'scenarios/support-note.yaml']}),
        ('scenario-int', {'scenarios': [1]}),
    ]
    for name, update in settings:
        campaign_case('campaign-settings', name, lambda c, update=update: c.update(copy.deepcopy(update)))
    campaign, scenarios = base('support-note')
    campaign['targets'].append(copy.deepcopy(campaign['targets'][0]))
    add('campaign-settings', 'duplicate-target@support-note', campaign, scenarios)
    campaign, scenarios = base('support-note')
    campaign['targets'].append(copy.deepcopy(campaign['targets'][0]))
    campaign['targets'][1]['id'] = 'second'
    add('campaign-settings', 'two-targets@support-note', campaign, scenarios)
    add('campaign-settings', 'campaign-json-extension@support-note', ('name', 'campaign.json'), base('support-note')[1])

    # -- transports
    transports = [
        ('stdio-no-command', {'type': 'stdio'}),
        ('stdio-empty-command', {'type': 'stdio', 'command': ''}),
        ('stdio-command-list', {'type': 'stdio', 'command': ['python']}),
        ('stdio-args-mixed', {'type': 'stdio', 'command': 'python', 'args': [1, 2.5, True, None, {'a': 1}, ['x']]}),
        ('stdio-args-string', {'type': 'stdio', 'command': 'python', 'args': '-m x'}),
        ('stdio-env-set', {'type': 'stdio', 'command': 'python', 'env': {'X': {'env': SET_VAR}}}),
        ('stdio-env-unset', {'type': 'stdio', 'command': 'python', 'env': {'X': {'env': UNSET_VAR}}}),
        ('stdio-env-lowercase', {'type': 'stdio', 'command': 'python', 'env': {'X': {'env': 'lower'}}}),
        ('stdio-env-string', {'type': 'stdio', 'command': 'python', 'env': {'X': 'value'}}),
        ('stdio-env-extra', {'type': 'stdio', 'command': 'python', 'env': {'X': {'env': SET_VAR, 'default': 'y'}}}),
        ('http', {'type': 'streamable_http', 'url': 'http://127.0.0.1:8000/mcp'}),
        ('http-https', {'type': 'streamable_http', 'url': 'https://example.invalid/mcp'}),
        ('http-ftp', {'type': 'streamable_http', 'url': 'ftp://example.invalid/'}),
        ('http-not-a-url', {'type': 'streamable_http', 'url': 'not a url'}),
        ('http-empty-url', {'type': 'streamable_http', 'url': ''}),
        ('http-no-url', {'type': 'streamable_http'}),
        ('http-headers-set', {'type': 'streamable_http', 'url': 'http://x/mcp', 'headers': {'Authorization': {'env': SET_VAR}}}),
        ('http-headers-unset', {'type': 'streamable_http', 'url': 'http://x/mcp', 'headers': {'Authorization': {'env': UNSET_VAR}}}),
        ('http-header-name-space', {'type': 'streamable_http', 'url': 'http://x/mcp', 'headers': {'Bad Name': {'env': SET_VAR}}}),
        ('http-command', {'type': 'streamable_http', 'url': 'http://x/mcp', 'command': 'x'}),
        ('unknown-type', {'type': 'websocket', 'url': 'ws://x'}),
        ('no-type', {'command': 'python'}),
        ('type-null', {'type': None, 'command': 'python'}),
        ('container-minimal', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1}),
        ('container-no-port', {'type': 'isolated_container', 'image': 'i', 'uid': 1, 'gid': 1}),
        ('container-empty-image', {'type': 'isolated_container', 'image': '', 'container_port': 80, 'uid': 1, 'gid': 1}),
        ('container-path-relative', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'path': 'mcp'}),
        ('container-command-ref', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'command': [{'runner': 'canary'}]}),
        ('container-command-int', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'command': [1]}),
        ('container-relay', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'relay_image': 'socat'}),
        ('container-env-unset', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'env': {'A': {'env': UNSET_VAR}}}),
        ('container-volumes', {'type': 'isolated_container', 'image': 'i', 'container_port': 80, 'uid': 1, 'gid': 1, 'volumes': ['/data']}),
    ]
    for name, transport in transports:
        for sid in ['support-note', 'http-verified']:
            campaign_case('transports', name, lambda c, transport=transport: c['targets'][0].__setitem__(
                'transport', copy.deepcopy(transport)), sid)

    # -- actions: http_request and container_sqlite_query in every phase
    http = {'type': 'http_request', 'id': 'probe', 'method': 'GET', 'url': 'http://127.0.0.1:9/state'}
    actions = [
        ('http', dict(http)), ('http-post-json', dict(http, method='POST', json={'a': [1, {'runner': 'canary'}]})),
        ('http-lowercase-method', dict(http, method='get')), ('http-method-head', dict(http, method='HEAD')),
        ('http-url-int', dict(http, url=5)), ('http-url-ref', dict(http, url={'runner': 'collector'})),
        ('http-headers-set', dict(http, headers={'X-Key': {'env': SET_VAR}})),
        ('http-headers-unset', dict(http, headers={'X-Key': {'env': UNSET_VAR}})),
        ('http-body-key', dict(http, body={'a': 1})), ('http-capture', dict(http, capture={'status': '/status'})),
        ('sqlite', {'type': 'container_sqlite_query', 'id': 'q', 'path': '/data/db.sqlite', 'query': 'SELECT 1'}),
        ('sqlite-relative', {'type': 'container_sqlite_query', 'id': 'q', 'path': 'db', 'query': 'SELECT 1'}),
        ('sqlite-empty-query', {'type': 'container_sqlite_query', 'id': 'q', 'path': '/db', 'query': ''}),
        ('sqlite-write', {'type': 'container_sqlite_query', 'id': 'q', 'path': '/db', 'query': 'DELETE FROM t'}),
        ('mcp-no-tool', {'type': 'mcp_tool', 'id': 'x'}), ('mcp-no-id', {'type': 'mcp_tool', 'tool': 'read_note'}),
        ('mcp-arguments-list', {'type': 'mcp_tool', 'id': 'x', 'tool': 'read_note', 'arguments': [1]}),
        ('mcp-tool-int', {'type': 'mcp_tool', 'id': 'x', 'tool': 5}),
        ('mcp-id-int', {'type': 'mcp_tool', 'id': 5, 'tool': 'read_note'}),
        ('mcp-empty-id', {'type': 'mcp_tool', 'id': '', 'tool': 'read_note'}),
        ('unknown-type', {'type': 'shell', 'id': 'x', 'command': 'true'}),
    ]
    for name, action in actions:
        for phase in ['setup', 'cleanup']:
            scenario_case('actions', f'{phase}={name}', 'rich',
                          lambda d, action=action, phase=phase: d[phase].append(copy.deepcopy(action)))
        scenario_case('actions', f'verify={name}', 'rich',
                      lambda d, action=action: d['verify']['checks'].append(
                          {'id': 'extra', 'action': copy.deepcopy(action),
                           'assertions': [{'path': '', 'op': 'contains', 'value': 'x'}]}))
    scenario_case('actions', 'verify-mode=any', 'rich', lambda d: d['verify'].__setitem__('mode', 'any'))
    scenario_case('actions', 'verify-mode=ALL', 'rich', lambda d: d['verify'].__setitem__('mode', 'ALL'))
    scenario_case('actions', 'verify-no-checks', 'rich', lambda d: d['verify'].__setitem__('checks', []))
    scenario_case('actions', 'verify-no-assertions', 'rich',
                  lambda d: d['verify']['checks'][0].__setitem__('assertions', []))
    scenario_case('actions', 'duplicate-action-ids', 'rich',
                  lambda d: d['cleanup'][0].__setitem__('id', 'prime'))
    scenario_case('actions', 'duplicate-check-ids', 'rich',
                  lambda d: d['verify']['checks'].append(copy.deepcopy(d['verify']['checks'][0])))

    # -- labelled examples
    for sid in SCENARIO_IDS:
        doc = scenario_doc(sid)
        for kind in ['proposal_rules', 'safety_rules']:
            for r, rule in enumerate(doc.get(kind, [])):
                scenario_case('examples', f'{kind}[{r}]-swapped', sid,
                              lambda d, kind=kind, r=r: d[kind][r].__setitem__('examples', {
                                  'positive': d[kind][r]['examples']['negative'],
                                  'negative': d[kind][r]['examples']['positive']}))
                for side in ['positive', 'negative']:
                    scenario_case('examples', f'{kind}[{r}]-{side}-empty', sid,
                                  lambda d, kind=kind, r=r, side=side: d[kind][r]['examples'].__setitem__(side, []))
                    scenario_case('examples', f'{kind}[{r}]-{side}-arguments-list', sid,
                                  lambda d, kind=kind, r=r, side=side: d[kind][r]['examples'][side][0].__setitem__('arguments', []))
                    scenario_case('examples', f'{kind}[{r}]-{side}-name-int', sid,
                                  lambda d, kind=kind, r=r, side=side: d[kind][r]['examples'][side][0].__setitem__('name', 5))
                    scenario_case('examples', f'{kind}[{r}]-{side}-no-arguments', sid,
                                  lambda d, kind=kind, r=r, side=side: d[kind][r]['examples'][side][0].pop('arguments'))
    scenario_case('examples', 'no-proposal-rules', 'support-note', lambda d: put(d, ('proposal_rules',), []))
    scenario_case('examples', 'proposal-rules-missing', 'support-note', lambda d: d.pop('proposal_rules'))
    scenario_case('examples', 'rule-tool-literal', 'support-note',
                  lambda d: put(d, ('proposal_rules', 0, 'tool'), 'read_demo_credential'))
    scenario_case('examples', 'rule-tool-int', 'support-note', lambda d: put(d, ('proposal_rules', 0, 'tool'), 5))
    scenario_case('examples', 'rule-tool-list', 'support-note',
                  lambda d: put(d, ('proposal_rules', 0, 'tool'), ['read_demo_credential']))
    scenario_case('examples', 'rule-tool-missing', 'support-note', lambda d: d['proposal_rules'][0].pop('tool'))
    scenario_case('examples', 'rule-id-int', 'support-note', lambda d: put(d, ('proposal_rules', 0, 'id'), 5))
    scenario_case('examples', 'duplicate-rule-ids', 'support-note',
                  lambda d: put(d, ('proposal_rules', 1, 'id'), d['proposal_rules'][0]['id']))

    # -- exercise
    for tag, tools in [('all', 'all'), ('ALL', 'ALL'), ('none', 'none'), ('empty', []), ('literal', ['read_note']),
                       ('int', [1]), ('map', {'a': 1}), ('null', None), ('unknown-binding', [{'binding': 'x'}])]:
        scenario_case('exercise', f'tools={tag}', 'support-note',
                      lambda d, tools=tools: put(d, ('exercise', 'tools'), copy.deepcopy(tools)))
        scenario_case('exercise', f'model-free-tools={tag}', 'support-note',
                      lambda d, tools=tools: put(d, ('exercise', 'tools'), copy.deepcopy(tools)),
                      lambda c: c.__setitem__('model_free', True))
    for tag, text in [('unknown-field', 'Use {nowhere}.'), ('canary', 'Canary {canary}.'),
                      ('binding', 'Tool {read_note}.'), ('capture', 'Note {note}.'), ('lone-brace', 'a { b'),
                      ('format-spec', '{canary:>10}'), ('attribute', '{canary.upper}'), ('index', '{canary[0]}'),
                      ('positional', '{}'), ('conversion', '{canary!r}'), ('int', 5)]:
        scenario_case('exercise', f'user={tag}', 'rich', lambda d, text=text: put(d, ('exercise', 'user'), text))
        scenario_case('exercise', f'model-free-user={tag}', 'rich',
                      lambda d, text=text: put(d, ('exercise', 'user'), text),
                      lambda c: c.__setitem__('model_free', True))

    # -- seeded random combinations: two mutations from different categories at once
    # -- combined: two single mutations of the same base at once, chosen with the fixed seed
    bases = sorted(recipes)
    combined = 0
    while combined < COMBINATIONS:
        scenario_id = rng.choice(bases)
        first, second = rng.sample(recipes[scenario_id], 2)
        campaign, scenarios = (rich_base() if scenario_id == 'rich' else base(scenario_id))
        key = next(iter(scenarios))
        try:
            for _, scenario_mutate, campaign_mutate in (first, second):
                if scenario_mutate:
                    scenario_mutate(scenarios[key])
                if campaign_mutate:
                    campaign_mutate(campaign)
        except (KeyError, IndexError, TypeError, AttributeError):
            continue  # the first mutation removed what the second changes
        name = f'{first[0]}+{second[0]}@{scenario_id}'
        if any(c.name == f'combined/{name}' for c in cases):
            continue
        add('combined', name, campaign, scenarios)
        combined += 1

    # -- a `{template: ...}` map in a free-form value of a schema_version 1 document (elengtis
    # version 2 reads it as a string template; the original, as a literal map). Made after
    # the seeded combinations, so they do not change which combinations are drawn.
    for tag, position, template in [
            ('assertion-names-canary', ('verify', 'checks', 0, 'assertions', 0, 'value'), 'code {canary}'),
            ('setup-argument-names-binding', ('setup', 0, 'arguments', 'x'), 'see {read_note}'),
            ('setup-argument-names-nothing', ('setup', 0, 'arguments', 'x'), 'Dear {customer}'),
            ('setup-argument-plain', ('setup', 0, 'arguments', 'x'), 'plain text')]:
        campaign, scenarios = rich_base()
        put(scenarios['support-note.yaml'], position, {'template': template})
        add('templates', f'v1-{tag}@rich', campaign, scenarios)
    return cases


def write_cases(out):
    cases = generate()
    root = out / 'cases'
    if root.exists():
        shutil.rmtree(root)
    names = set()
    listing = []
    for index, case in enumerate(cases):
        if case.name in names:
            raise SystemExit(f'duplicate case name {case.name}')
        names.add(case.name)
        directory = root / f'{index:04d}'
        (directory / 'scenarios').mkdir(parents=True)
        campaign_name = 'campaign.yaml'
        campaign = case.campaign
        if isinstance(campaign, tuple) and campaign[0] == 'name':
            campaign_name = campaign[1]
            campaign = base('support-note')[0]
        text = campaign[1] if isinstance(campaign, tuple) else dump(campaign)
        (directory / campaign_name).write_text(text, encoding='utf-8')
        for file_name, scenario in case.scenarios.items():
            text = scenario[1] if isinstance(scenario, tuple) else dump(scenario)
            (directory / 'scenarios' / file_name).write_text(text, encoding='utf-8')
        listing.append({'name': case.name, 'category': case.category,
                        'campaign': str((directory / campaign_name).relative_to(out))})
    return listing


def original_verdict(path):
    """Load with the original's loader: accepted, or the first line of its error."""
    from elengtis.config import load_campaign, plan_trials
    try:
        trials = [t.trial_id for t in plan_trials(load_campaign(path))]
        return {'accepted': True, 'trials': trials}
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        return {'accepted': False, 'crash': None, 'error': str(exc).strip()[:2000]}
    except Exception as exc:  # the original's CLI prints these as `Run failed` too
        return {'accepted': False, 'crash': type(exc).__name__, 'error': f'{type(exc).__name__}: {exc}'[:2000],
                'traceback': traceback.format_exc()[-1500:]}


def run_campaigns(pairs):
    """`elengtis run --config CAMPAIGN --out OUT [--trials N]` of the original, for each
    `CAMPAIGN=OUT[=N]`, in this one process (the CLI's own code path: load_campaign with its
    overrides, then run_matrix), so the interpreter and its imports start once."""
    import asyncio
    from elengtis.cli import run_matrix
    from elengtis.config import load_campaign
    for pair in pairs:
        campaign, out, *trials = pair.split('=')
        overrides = {'trials': int(trials[0])} if trials else None
        try:
            asyncio.run(run_matrix(load_campaign(Path(campaign), overrides), Path(out)))
        except Exception as exc:  # the CLI prints these as `Run failed` and exits 1
            print(f'{campaign}: Run failed: {exc}', file=sys.stderr)


def main():
    command = sys.argv[1]
    if command == 'run':
        run_campaigns(sys.argv[2:])
        return
    out = Path(sys.argv[2])
    if command != 'generate':
        raise SystemExit(f'unknown command {command}')
    if os.environ.get(UNSET_VAR) is not None or os.environ.get(SET_VAR) is None:
        raise SystemExit(f'{SET_VAR} must be set and {UNSET_VAR} unset')
    out.mkdir(parents=True, exist_ok=True)
    listing = write_cases(out)
    for case in listing:
        case['original'] = original_verdict(out / case['campaign'])
    (out / 'cases.json').write_text(json.dumps(listing, indent=1) + '\n')
    print(f'{len(listing)} cases')


if __name__ == '__main__':
    main()
