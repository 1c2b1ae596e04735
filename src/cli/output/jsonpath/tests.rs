//! Table tests: each expected output was recorded from client-go's own
//! `util/jsonpath` (the code kubectl runs) over the same data, so a case
//! that passes prints what `kubectl get -o jsonpath=` prints.

use serde_json::{Value, json};

use super::{gofmt, parse, relaxed};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fails {
    /// Refused while parsing: a usage error before any request.
    Usage,
    /// Fails while printing, as kubectl does.
    Exec,
}
use Fails::{Exec, Usage};

type Case = (&'static str, Result<&'static str, Fails>);

/// The example of kubectl's JSONPath documentation, and some odd values.
fn doc() -> Value {
    json!({"kind": "List", "items": [
        {"kind": "None", "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
         "status": {"capacity": {"cpu": "4"}, "ready": true,
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]}},
        {"kind": "None", "metadata": {"name": "127.0.0.2"},
         "status": {"capacity": {"cpu": "8"}, "ready": false,
                    "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.2"},
                                  {"type": "another", "address": "127.0.0.3"}]}}],
     "users": [{"name": "myself", "user": {}},
               {"name": "e2e", "user": {"username": "admin", "password": "secret"}}],
     "nums": [1, 2.5, -3, 1000000, 1e-05, 1e+21, 12345678901_i64],
     "weird": {"a<b": "x&y\u{2028}", "nl": "a\nb\tc\u{1}", "nil": null, "empty": {}, "arr": []}})
}

/// Two Runners as `kubectl get runners` hands them to the template.
fn runners() -> Value {
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [
        {"apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
         "metadata": {"name": "web", "namespace": "team", "labels": {"team": "web", "tier": "front"}},
         "spec": {"image": "nginx:1.27", "replicas": 2, "expose": {"port": 80}},
         "status": {"phase": "Available", "readyReplicas": 2,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "MinimumReplicasAvailable"}]}},
        {"apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
         "metadata": {"name": "api", "namespace": "team"},
         "spec": {"image": "ghcr.io/x/api:2", "replicas": 1, "expose": {"port": 8080, "hosts": ["api.example.com"]}}}]})
}

fn run(data: &Value, template: &str) -> Result<String, Fails> {
    let t = parse(template).map_err(|_| Usage)?;
    t.execute(data).map_err(|_| Exec)
}

fn check(data: &Value, cases: &[Case]) {
    for (template, want) in cases {
        assert_eq!(run(data, template).as_deref().map_err(|f| *f), *want, "template {template:?}");
    }
}

#[rustfmt::skip]
const DOC_CASES: &[Case] = &[
    ("kind is {.kind}", Ok("kind is List")),
    ("{@}", Ok("{\"items\":[{\"kind\":\"None\",\"metadata\":{\"labels\":{\"kubernetes.io/hostname\":\"127.0.0.1\"},\"name\":\"127.0.0.1\"},\"status\":{\"addresses\":[{\"address\":\"127.0.0.1\",\"type\":\"LegacyHostIP\"}],\"capacity\":{\"cpu\":\"4\"},\"ready\":true}},{\"kind\":\"None\",\"metadata\":{\"name\":\"127.0.0.2\"},\"status\":{\"addresses\":[{\"address\":\"127.0.0.2\",\"type\":\"LegacyHostIP\"},{\"address\":\"127.0.0.3\",\"type\":\"another\"}],\"capacity\":{\"cpu\":\"8\"},\"ready\":false}}],\"kind\":\"List\",\"nums\":[1,2.5,-3,1000000,0.00001,1e+21,12345678901],\"users\":[{\"name\":\"myself\",\"user\":{}},{\"name\":\"e2e\",\"user\":{\"password\":\"secret\",\"username\":\"admin\"}}],\"weird\":{\"a\\u003cb\":\"x\\u0026y\\u2028\",\"arr\":[],\"empty\":{},\"nil\":null,\"nl\":\"a\\nb\\tc\\u0001\"}}")),
    ("{.kind}", Ok("List")),
    ("{['kind']}", Ok("List")),
    ("{..name}", Ok("127.0.0.1 127.0.0.2 myself e2e")),
    ("{.items[*].metadata.name}", Ok("127.0.0.1 127.0.0.2")),
    ("{.users[0].name}", Ok("myself")),
    ("{.items[*]['metadata.name', 'status.capacity']}", Ok("127.0.0.1 127.0.0.2 {\"cpu\":\"4\"} {\"cpu\":\"8\"}")),
    ("{.users[?(@.name==\"e2e\")].user.password}", Ok("secret")),
    ("{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}", Ok("[127.0.0.1, {\"cpu\":\"4\"}] [127.0.0.2, {\"cpu\":\"8\"}] ")),
    ("{range .items[*]}{.metadata.name}{'\\t'}{end}", Ok("127.0.0.1\t127.0.0.2\t")),
    ("{.items[-1:].metadata.name}", Ok("127.0.0.2")),
    ("{.items[-1].metadata.name}", Ok("127.0.0.2")),
    ("{.items[0:1].metadata.name}", Ok("127.0.0.1")),
    ("{.items[::2].metadata.name}", Ok("127.0.0.1")),
    ("{.items[5].metadata.name}", Err(Exec)),
    ("{.items[]}", Ok("{\"kind\":\"None\",\"metadata\":{\"labels\":{\"kubernetes.io/hostname\":\"127.0.0.1\"},\"name\":\"127.0.0.1\"},\"status\":{\"addresses\":[{\"address\":\"127.0.0.1\",\"type\":\"LegacyHostIP\"}],\"capacity\":{\"cpu\":\"4\"},\"ready\":true}}")),
    ("{.items[1:0]}", Err(Exec)),
    ("{.items[0:0]}", Ok("")),
    ("{.items[::0]}", Err(Exec)),
    ("{.items[*].status.ready}", Ok("true false")),
    ("{.nums}", Ok("[1,2.5,-3,1000000,0.00001,1e+21,12345678901]")),
    ("{.nums[*]}", Ok("1 2.5 -3 1000000 1e-05 1e+21 12345678901")),
    ("{.weird}", Ok("{\"a\\u003cb\":\"x\\u0026y\\u2028\",\"arr\":[],\"empty\":{},\"nil\":null,\"nl\":\"a\\nb\\tc\\u0001\"}")),
    ("{.weird.nil}", Ok("null")),
    ("{.weird.empty} {.weird.arr}", Ok("{} []")),
    ("{.weird['a<b']}", Ok("x&y\u{2028}")),
    ("{.items[?(@.status.ready==true)].metadata.name}", Ok("127.0.0.1")),
    ("{.items[?(@.status.ready)].metadata.name}", Ok("127.0.0.1 127.0.0.2")),
    ("{.items[?(@.status.capacity.cpu>\"5\")].metadata.name}", Ok("127.0.0.2")),
    ("{.nums[?(@>1)]}", Err(Exec)),
    ("{.nums[?(@ > 1)]}", Err(Exec)),
    ("{.items[?(@.metadata.labels)].metadata.name}", Ok("127.0.0.1")),
    ("{.items[?(@.metadata.name!='127.0.0.1')].metadata.name}", Ok("127.0.0.2")),
    ("{.items[?(@.status.ready<true)]}", Err(Exec)),
    ("{.items[?(@.status.capacity==1)]}", Err(Exec)),
    ("{.kind[0]}", Err(Exec)),
    ("{.kind.*}", Ok("76 105 115 116")),
    ("{.kind[?(@.x)]}", Err(Exec)),
    ("{.metadata.labels.kubernetes\\.io/hostname}", Ok("")),
    ("{.items[0].metadata.labels.kubernetes\\.io/hostname}", Ok("127.0.0.1")),
    ("{.items[*].metadata.labels['kubernetes\\.io/hostname']}", Ok("127.0.0.1")),
    ("{range .items[*]}{range .status.addresses[*]}{.address}{\",\"}{end}{\"\\n\"}{end}", Ok("127.0.0.1,\n127.0.0.2,127.0.0.3,\n")),
    ("{range .nothing[*]}x{end}after", Ok("after")),
    ("{range .items[*]}{.metadata.name}{\"\\n\"}{end}tail {.kind}", Ok("127.0.0.1\n127.0.0.2\ntail List")),
    ("{end}", Err(Usage)),
    ("{foo}", Err(Usage)),
    ("{", Err(Usage)),
    ("{.a", Err(Usage)),
    ("{\"unterminated}", Err(Usage)),
    ("{.items[}", Err(Usage)),
    ("{.items[a]}", Err(Usage)),
    ("{.items[1:2:3:4]}", Err(Usage)),
    ("{....a}", Err(Usage)),
    ("{\"\\q\"}", Err(Usage)),
    ("{'\\''}", Ok("'")),
    ("{\"\\x41\\u00e9\\101\"}", Ok("AéA")),
    ("{'a\"b'}", Ok("a\"b")),
    ("plain text", Ok("plain text")),
    ("", Ok("")),
    ("{.users[0,1].name}", Ok("myself e2e")),
    ("{.nums[1]}", Ok("2.5")),
    ("{.nums[5]}", Ok("1e+21")),
    ("{.nums[6]}", Ok("12345678901")),
    ("{true}", Ok("true")),
    ("{1}", Ok("1")),
    ("{-2.5}", Ok("-2.5")),
    ("{.items[0] .kind}", Ok("None")),
    ("{.users[?(@.user.username)].name}", Ok("e2e")),
    ("{.users[?(@.name==1)]}", Err(Exec)),
    ("{.users[?(@..username)].name}", Ok("e2e")),
];

#[rustfmt::skip]
const RUNNER_CASES: &[Case] = &[
    ("{.items[*].metadata.name}", Ok("web api")),
    ("{range .items[*]}{.metadata.name}{\"\\t\"}{.spec.image}{\"\\n\"}{end}", Ok("web\tnginx:1.27\napi\tghcr.io/x/api:2\n")),
    ("{.items[?(@.spec.replicas>1)].metadata.name}", Ok("web")),
    ("{.items[?(@.status.phase==\"Available\")].metadata.name}", Ok("web")),
    ("{.items[*].status.conditions[?(@.type==\"Ready\")].status}", Ok("True")),
    ("{.items[0].metadata.labels}", Ok("{\"team\":\"web\",\"tier\":\"front\"}")),
    ("{.items[*].spec}", Ok("{\"expose\":{\"port\":80},\"image\":\"nginx:1.27\",\"replicas\":2} {\"expose\":{\"hosts\":[\"api.example.com\"],\"port\":8080},\"image\":\"ghcr.io/x/api:2\",\"replicas\":1}")),
    ("{.items[*].spec.expose.hosts[0]}", Ok("api.example.com")),
    ("{.items[*].metadata.labels.team}", Ok("web")),
    ("{.metadata}", Ok("{\"resourceVersion\":\"\"}")),
    ("{.items[1].status}", Ok("")),
];

#[rustfmt::skip]
const COLUMN_CASES: &[(&str, &str)] = &[
    ("{.metadata.labels}", "map[team:web tier:front]"),
    ("{.weird}", "map[a<b:x&y\u{2028} arr:[] empty:map[] nil:<nil> nl:a\nb\tc\u{1}]"),
    ("{.nums[*]}", "1,2.5,-3,1000000,1e-05,1e+21,12345678901"),
    ("{.items[*].metadata.name}", "127.0.0.1,127.0.0.2"),
    ("{.users[*].user}", "map[],map[password:secret username:admin]"),
    ("{.weird.nil}", "<nil>"),
    ("{.nums[4]}", "1e-05"),
];

#[test]
fn templates_print_what_kubectl_prints() {
    check(&doc(), DOC_CASES);
}

#[test]
fn runner_templates_print_what_kubectl_prints() {
    check(&runners(), RUNNER_CASES);
}

#[test]
fn column_values_are_go_values_joined_by_commas() {
    let (doc, web) = (doc(), runners()["items"][0].clone());
    for (template, want) in COLUMN_CASES {
        let data = if template.starts_with("{.metadata") { &web } else { &doc };
        let values = parse(template).unwrap().find(data).unwrap();
        let got: Vec<String> = values.iter().flatten().map(|v| gofmt::sprint(v)).collect();
        assert_eq!(got.join(","), *want, "template {template:?}");
    }
}

#[test]
fn relaxed_paths_accept_kubectl_spellings_of_the_same_field() {
    let web = &runners()["items"][0];
    for path in ["spec.image", ".spec.image", "{spec.image}", "{.spec.image}"] {
        assert_eq!(relaxed(path).unwrap().execute(web).unwrap(), "nginx:1.27", "{path}");
    }
    assert_eq!(relaxed("").unwrap().execute(web).unwrap(), "");
    for bad in ["{}", "{.a", "a}", "{.a}{.b}", "{.spec[}"] {
        assert!(relaxed(bad).is_err(), "{bad}");
    }
}

#[test]
fn floats_print_as_go_prints_them() {
    let cases = [(1e6, "1e+06"), (123456.0, "123456"), (1234567.0, "1.234567e+06"), (1e-4, "0.0001")];
    for (f, want) in cases.into_iter().chain([(1e-5, "1e-05"), (-2.5e-5, "-2.5e-05"), (0.0, "0"), (3.0, "3")])
    {
        assert_eq!(gofmt::float_v(f), want, "{f}");
    }
    assert_eq!(
        gofmt::json(&json!([1e20, 1e21, 1e-7, -0.000025])),
        "[100000000000000000000,1e+21,1e-7,-0.000025]"
    );
}

#[test]
fn a_parse_error_says_what_is_wrong() {
    for (template, needle) in [
        ("{.items[}", "unterminated array"),
        ("{end}", "{end} without a {range}"),
        ("{range .items[*]}{.x}", "{range} without an {end}"),
        ("{.items[?(@.a=<1)]}", "unrecognized filter operator =<"),
        ("{foo}", "unrecognized identifier foo"),
    ] {
        let err = parse(template).unwrap_err();
        assert!(err.contains(needle), "{template}: {err}");
    }
}
