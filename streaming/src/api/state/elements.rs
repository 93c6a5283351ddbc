//! Element-level changes of collection states, for engines that write each change back
//! (the Redis engine): which elements of a key's list, map or set changed since the last
//! write, and their JSON encoding. An engine that keeps state in the process tracks none:
//! its handles open without a change log.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// What kind of collection a state keeps per key (how an engine stores it).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectionKind {
    /// A list: elements in order.
    List,
    /// A map: entries by map key.
    Map,
    /// A set: members.
    Set,
}

/// The changes of one key's map or set since they were last written: the elements put,
/// added or removed, and whether the whole collection was cleared first.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct ElementChanges<E> {
    pub(crate) cleared: bool,
    pub(crate) elements: HashSet<E>,
}

impl<E> Default for ElementChanges<E> {
    fn default() -> Self {
        ElementChanges {
            cleared: false,
            elements: HashSet::new(),
        }
    }
}

impl<E: Hash + Eq> ElementChanges<E> {
    /// `element` was put, added or removed.
    #[inline]
    pub(crate) fn touch(&mut self, element: &E)
    where
        E: Clone,
    {
        if !self.elements.contains(element) {
            self.elements.insert(element.clone());
        }
    }
}

/// A key's changes after `clear()`: the stored collection goes.
pub(crate) trait Cleared {
    /// Every element was removed.
    fn clear(&mut self);
}

impl<E> Cleared for ElementChanges<E> {
    fn clear(&mut self) {
        self.cleared = true;
        self.elements.clear();
    }
}

impl Cleared for ListChanges {
    fn clear(&mut self) {
        self.replaced = true;
    }
}

/// The changes of one key's list since it was last written: elements appended from index
/// `from` on, or the whole list replaced (`update`, `clear`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ListChanges {
    pub(crate) replaced: bool,
    pub(crate) from: usize,
}

/// One key's collection changes, encoded as JSON for an engine to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EncodedChanges {
    /// The stored collection is deleted before `added` is written.
    pub(crate) replaced: bool,
    /// The collection's size after the changes.
    pub(crate) size: usize,
    /// Map: field, value, field, value, …; set: members; list: elements to append.
    pub(crate) added: Vec<String>,
    /// Map: fields; set: members (never for a list).
    pub(crate) removed: Vec<String>,
}

/// How a collection state's elements are encoded: its kind, how to encode a key's changes
/// and how to decode a stored collection. Built by the descriptors' `persistent`.
#[doc(hidden)]
pub struct ElementCodec<C, D> {
    pub(crate) kind: CollectionKind,
    /// The key's collection now (`None`: empty) and its changes.
    pub(crate) encode: fn(Option<&C>, &D) -> Result<EncodedChanges, String>,
    /// A stored collection: map fields and values alternating, set members, list elements.
    pub(crate) decode: fn(Vec<String>) -> Result<C, String>,
}

impl<C, D> Clone for ElementCodec<C, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C, D> Copy for ElementCodec<C, D> {}

impl<C, D> std::fmt::Debug for ElementCodec<C, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ElementCodec({:?})", self.kind)
    }
}

fn json<T: Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

fn from_json<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_str(s).map_err(|e| format!("{s}: {e}"))
}

/// The changes of a map or set: after a clear, every element of `now`; else each touched
/// element, added with its fields when `add` finds it in the collection (pushing them:
/// a map's field and value, a set's member) and removed otherwise.
fn encode_touched<'a, E: Serialize + 'a>(
    size: usize,
    changes: &ElementChanges<E>,
    now: impl Iterator<Item = &'a E>,
    mut add: impl FnMut(&E, &mut Vec<String>) -> Result<bool, String>,
) -> Result<EncodedChanges, String> {
    let mut out = EncodedChanges {
        replaced: changes.cleared,
        size,
        ..EncodedChanges::default()
    };
    // After a clear every element is new; else only those touched.
    if changes.cleared {
        for e in now {
            add(e, &mut out.added)?;
        }
        return Ok(out);
    }
    for e in &changes.elements {
        if !add(e, &mut out.added)? {
            out.removed.push(json(e)?);
        }
    }
    Ok(out)
}

fn encode_map<MK: Serialize + Hash + Eq, MV: Serialize>(
    map: Option<&HashMap<MK, MV>>,
    changes: &ElementChanges<MK>,
) -> Result<EncodedChanges, String> {
    let size = map.map_or(0, HashMap::len);
    encode_touched(
        size,
        changes,
        map.into_iter().flat_map(HashMap::keys),
        |k, added| {
            let Some(v) = map.and_then(|m| m.get(k)) else {
                return Ok(false);
            };
            added.extend([json(k)?, json(v)?]);
            Ok(true)
        },
    )
}

fn decode_map<MK: DeserializeOwned + Hash + Eq, MV: DeserializeOwned>(
    stored: Vec<String>,
) -> Result<HashMap<MK, MV>, String> {
    let mut map = HashMap::with_capacity(stored.len() / 2);
    let mut it = stored.iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        map.insert(from_json(k)?, from_json(v)?);
    }
    Ok(map)
}

fn encode_set<T: Serialize + Hash + Eq>(
    set: Option<&HashSet<T>>,
    changes: &ElementChanges<T>,
) -> Result<EncodedChanges, String> {
    let size = set.map_or(0, HashSet::len);
    encode_touched(size, changes, set.into_iter().flatten(), |t, added| {
        let present = set.is_some_and(|s| s.contains(t));
        if present {
            added.push(json(t)?);
        }
        Ok(present)
    })
}

/// A stored set or list: one element per entry, in order.
fn decode_each<C: FromIterator<T>, T: DeserializeOwned>(stored: Vec<String>) -> Result<C, String> {
    stored.iter().map(|s| from_json(s)).collect()
}

fn encode_list<T: Serialize>(
    list: Option<&Vec<T>>,
    changes: &ListChanges,
) -> Result<EncodedChanges, String> {
    let list = list.map_or(&[][..], Vec::as_slice);
    let from = if changes.replaced {
        0
    } else {
        changes.from.min(list.len())
    };
    Ok(EncodedChanges {
        replaced: changes.replaced,
        size: list.len(),
        added: list[from..].iter().map(json).collect::<Result<_, _>>()?,
        removed: Vec::new(),
    })
}

impl<MK, MV> ElementCodec<HashMap<MK, MV>, ElementChanges<MK>>
where
    MK: Serialize + DeserializeOwned + Hash + Eq,
    MV: Serialize + DeserializeOwned,
{
    /// A map's entries: field = map key as JSON, value = value as JSON.
    pub(crate) const fn map() -> Self {
        ElementCodec {
            kind: CollectionKind::Map,
            encode: encode_map::<MK, MV>,
            decode: decode_map::<MK, MV>,
        }
    }
}

impl<T> ElementCodec<HashSet<T>, ElementChanges<T>>
where
    T: Serialize + DeserializeOwned + Hash + Eq,
{
    /// A set's members as JSON.
    pub(crate) const fn set() -> Self {
        ElementCodec {
            kind: CollectionKind::Set,
            encode: encode_set::<T>,
            decode: decode_each::<HashSet<T>, T>,
        }
    }
}

impl<T: Serialize + DeserializeOwned> ElementCodec<Vec<T>, ListChanges> {
    /// A list's elements as JSON, in order.
    pub(crate) const fn list() -> Self {
        ElementCodec {
            kind: CollectionKind::List,
            encode: encode_list::<T>,
            decode: decode_each::<Vec<T>, T>,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes<E: Hash + Eq + Clone>(cleared: bool, touched: &[E]) -> ElementChanges<E> {
        let mut c = ElementChanges::default();
        if cleared {
            c.clear();
        }
        for e in touched {
            c.touch(e);
        }
        c
    }

    #[test]
    fn a_map_encodes_only_the_entries_touched() {
        let map: HashMap<String, u32> = (0..1000).map(|i| (format!("k{i}"), i)).collect();
        let out = encode_map(Some(&map), &changes(false, &["k7".into(), "gone".into()])).unwrap();
        assert_eq!(out.added, ["\"k7\"", "7"]);
        assert_eq!(out.removed, ["\"gone\""]);
        assert_eq!((out.replaced, out.size), (false, 1000));
        let back: HashMap<String, u32> = decode_map(out.added).unwrap();
        assert_eq!(back, HashMap::from([("k7".to_string(), 7)]));
    }

    #[test]
    fn a_cleared_map_is_replaced_by_its_entries_since() {
        let map = HashMap::from([(1u8, "a".to_string())]);
        let out = encode_map(Some(&map), &changes(true, &[1u8, 2])).unwrap();
        assert_eq!(out.added, ["1", "\"a\""]);
        assert!(out.replaced && out.removed.is_empty());
        let out = encode_map::<u8, String>(None, &changes(true, &[])).unwrap();
        assert_eq!((out.replaced, out.size, out.added.len()), (true, 0, 0));
        let out = encode_map::<u8, String>(None, &changes(false, &[3])).unwrap();
        assert_eq!(out.removed, ["3"], "the last entry removed");
    }

    #[test]
    fn a_set_encodes_added_and_removed_members() {
        let set = HashSet::from(["x".to_string(), "y".to_string()]);
        let out = encode_set(Some(&set), &changes(false, &["y".into(), "z".into()])).unwrap();
        assert_eq!(
            (out.added, out.removed),
            (vec!["\"y\"".into()], vec!["\"z\"".into()])
        );
        let back: HashSet<String> = decode_each(vec!["\"x\"".into()]).unwrap();
        assert!(back.contains("x"));
    }

    #[test]
    fn a_list_appends_from_its_first_new_index_or_is_replaced() {
        let list = vec![1, 2, 3];
        let appended = ListChanges {
            replaced: false,
            from: 2,
        };
        assert_eq!(encode_list(Some(&list), &appended).unwrap().added, ["3"]);
        let replaced = ListChanges {
            replaced: true,
            from: 3,
        };
        let out = encode_list(Some(&list), &replaced).unwrap();
        assert_eq!((out.replaced, out.added.len(), out.size), (true, 3, 3));
        assert_eq!(decode_each::<Vec<i32>, i32>(out.added).unwrap(), list);
        assert!(decode_each::<Vec<i32>, i32>(vec!["x".into()]).is_err());
    }
}
