//! Lists, watch events and objects read within their bounds, and errors that quote nothing.

use super::*;
use serde_json::json;

fn read(kind: Kind, v: &serde_json::Value) -> Object {
    object(kind, serde_json::to_vec(v).unwrap().as_slice()).unwrap()
}

#[test]
fn a_configmap_reads_as_the_kubelet_projects_it() {
    let o = read(
        Kind::ConfigMap,
        &json!({"metadata": {"name": "app", "uid": "u", "resourceVersion": "7",
                "managedFields": [{"manager": "x"}]},
                "data": {"version": "2.4.1"}, "binaryData": {"blob": "AAH/"}}),
    );
    assert_eq!(
        (o.name.as_deref(), o.uid.as_deref()),
        (Some("app"), Some("u"))
    );
    assert_eq!(o.resource_version.as_deref(), Some("7"));
    assert!(o.status.is_none());
    let keys = o.keys.unwrap().into_map();
    assert_eq!(keys["version"], b"2.4.1");
    assert_eq!(keys["blob"], [0, 1, 255]);
}

#[test]
fn a_secret_s_data_is_base64_and_string_data_is_never_read() {
    let o = read(
        Kind::Secret,
        &json!({"data": {"token": "MTIzNA=="}, "stringData": {"x": "write-only"}}),
    );
    let keys = o.keys.unwrap().into_map();
    assert_eq!(keys.keys().collect::<Vec<_>>(), ["token"]);
    assert_eq!(keys["token"], b"1234");
}

#[test]
fn past_max_keys_nothing_more_is_kept_and_the_metadata_is_still_read() {
    let data: serde_json::Map<String, serde_json::Value> = (0..=MAX_KEYS)
        .map(|i| (format!("k{i}"), json!("x")))
        .collect();
    // Metadata after the keys: the JSON object's order is not fixed.
    let o = read(
        Kind::ConfigMap,
        &json!({"data": data, "metadata": {"resourceVersion": "9"}}),
    );
    assert_eq!(o.keys.unwrap_err(), Refused::TooManyKeys);
    assert_eq!(
        Refused::TooManyKeys.to_string(),
        Broken::TooManyKeys.to_string()
    );
    assert_eq!(o.resource_version.as_deref(), Some("9"));
}

#[test]
fn past_max_bytes_the_key_is_named_and_nothing_more_is_kept() {
    let half = "x".repeat(MAX_BYTES as usize / 2);
    // `binaryData` comes first here (the encoder sorts): one byte, then `a`, then `b` passes it.
    let o = read(
        Kind::ConfigMap,
        &json!({"data": {"a": half, "b": half}, "binaryData": {"c": "AA=="}}),
    );
    let why = o.keys.unwrap_err();
    assert_eq!(why, Refused::OverSize { key: "b".into() });
    let why = why.to_string();
    assert!(
        why.contains("size limit of 1048576 bytes") && why.contains("at key b"),
        "{why}"
    );
}

#[test]
fn bad_keys_and_bad_base64_are_refused_without_their_content() {
    let o = read(
        Kind::ConfigMap,
        &json!({"data": {"a": "x"}, "binaryData": {"a": "AA=="}}),
    );
    assert!(matches!(
        o.keys.unwrap_err(),
        Refused::Key(KeyError::Both(_))
    ));
    let o = read(Kind::ConfigMap, &json!({"binaryData": {"b": "hunter2!"}}));
    let why = o.keys.unwrap_err();
    assert_eq!(why.to_string(), "binaryData key b is not valid base64");
    let o = read(Kind::ConfigMap, &json!({"data": {"..data": "x"}}));
    assert!(
        o.keys
            .unwrap_err()
            .to_string()
            .contains("not a valid ConfigMap key")
    );
}

#[test]
fn lists_events_and_statuses() {
    let l = list(
        Kind::ConfigMap,
        br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"app"},"data":{"a":"1"}}]}"#.as_slice(),
    )
    .unwrap();
    assert_eq!(l.resource_version.as_deref(), Some("5"));
    assert_eq!(l.item.unwrap().name.as_deref(), Some("app"));
    let empty = list(
        Kind::ConfigMap,
        br#"{"metadata":{},"items":null}"#.as_slice(),
    )
    .unwrap();
    assert!(empty.item.is_none());
    // `object` before `type`, as a sorted encoder writes it.
    let e = watch_event(
        Kind::ConfigMap,
        br#"{"object":{"kind":"Status","code":410,"reason":"Expired","message":"too old","metadata":{}},"type":"ERROR"}"#.as_slice(),
    )
    .unwrap();
    assert_eq!(e.kind, EventType::Error);
    let s = e.object.status.unwrap();
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
}

#[test]
fn an_unreadable_answer_is_named_without_its_text() {
    let e = object(Kind::ConfigMap, br#"{"data": {"a": 1234567}}"#.as_slice()).unwrap_err();
    assert!(!e.to_string().contains("1234567"), "{e}");
    assert!(e.to_string().starts_with("not the shape"), "{e}");
    let e = watch_event(Kind::ConfigMap, br#"{"type":"ADDED","object":{"#.as_slice()).unwrap_err();
    assert!(e.to_string().starts_with("the answer ends early"), "{e}");
}
