//! The helpers rules call, written in Rust: `lists.<name>:find(x)`, `:claimed(ua)` and `:len()`,
//! and `browser(ua)`.
//!
//! They are C functions on Lua's C API, not mlua callbacks. A default-rules evaluation makes
//! four helper calls, and mlua's callback machinery (argument conversion through its reference
//! stack, error wrapping) cost more than the lookups themselves. Each list is a table of
//! closures whose upvalue points at the compiled `List`, which the thread's rules state keeps
//! alive for as long as the Lua state.
//!
//! A panic must not unwind through Lua's C frames, and a Lua error (a longjmp) must not cross a
//! Rust frame that owns something: so each helper does its Rust work (the lookups) inside
//! [`guarded`], which turns a panic into a Lua error raised after the Rust frames are done, and
//! talks to Lua only outside it.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::net::IpAddr;
use std::sync::Arc;

use mlua::{Function, Lua, Table, ffi};

use super::Compiled;
use super::lists::List;
use crate::support::user_agent::browser_claim;

/// Makes the `lists` table and the `browser` function for the sandbox. The returned lists must
/// outlive `lua`.
pub(super) fn install(lua: &Lua, compiled: &Compiled) -> mlua::Result<(Table, Function, Vec<Arc<List>>)> {
    let lists = lua.create_table()?;
    let mut kept = Vec::new();
    for (name, list) in &compiled.lists {
        let methods = lua.create_table()?;
        let target = Arc::as_ptr(list).cast::<c_void>();
        methods.set("find", closure(lua, list_find, target)?)?;
        methods.set("claimed", closure(lua, list_claimed, target)?)?;
        methods.set("len", closure(lua, list_len, target)?)?;
        lists.set(name.as_str(), methods)?;
        kept.push(list.clone());
    }
    // SAFETY: `browser` has no upvalues and follows the rules in `list_find`.
    let browser = unsafe { lua.create_c_function(browser) }?;
    Ok((lists, browser, kept))
}

/// A C closure of `function` with `target` as its one upvalue.
fn closure(lua: &Lua, function: ffi::lua_CFunction, target: *const c_void) -> mlua::Result<Function> {
    // SAFETY: pushes one value, the closure, which `exec_raw` returns; `lua_pushcclosure` raises
    // only on a memory error, caught by `exec_raw`'s protected call.
    unsafe {
        lua.exec_raw((), |state| {
            ffi::lua_pushlightuserdata(state, target.cast_mut());
            ffi::lua_pushcclosure(state, function, 1);
        })
    }
}

/// The list a method closure belongs to, after checking it was called with `:`.
///
/// SAFETY: `state` is running a closure made by `closure` from a live `List`. May raise a Lua
/// error; callers own nothing that needs dropping.
unsafe fn list_of<'a>(state: *mut ffi::lua_State, method: &CStr) -> &'a List {
    // SAFETY: see above.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            ffi::luaL_error(state, c"call it as list:%s(...)".as_ptr(), method.as_ptr());
        }
        &*ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)).cast::<List>()
    }
}

/// `list:find(x)`: the matching token (and, for a token in a section, the section's name), the
/// network's or path's label (or true), or the ASN's name (or true); nil when `x` is nil or not
/// in the list.
///
/// Like every helper here it runs inside a Lua call: it may raise Lua errors (a longjmp), so it
/// holds nothing that needs dropping, and it never panics.
unsafe extern "C-unwind" fn list_find(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: see `list_of`, `bytes_at` and `push_label`.
    unsafe {
        let list = list_of(state, c"find");
        let found = match (list, ffi::lua_type(state, 2)) {
            (_, ffi::LUA_TNIL | ffi::LUA_TNONE) => None,
            (List::Tokens(tokens), ffi::LUA_TSTRING) => {
                let text = bytes_at(state, 2);
                // A token in a section comes with the section's name (ai-crawlers.txt's kinds).
                return match guarded(state, || tokens.find_labelled(text)) {
                    Some((token, Some(section))) => {
                        push_label(state, Some(token)) + push_label(state, Some(section))
                    }
                    Some((token, None)) => push_label(state, Some(token)),
                    None => push_label(state, None),
                };
            }
            (List::Paths(paths), ffi::LUA_TSTRING) => {
                let text = bytes_at(state, 2);
                guarded(state, || paths.find(text))
            }
            (List::Networks(networks), ffi::LUA_TSTRING) => {
                let text = bytes_at(state, 2);
                guarded(state, || {
                    std::str::from_utf8(text)
                        .ok()
                        .and_then(|text| text.parse::<IpAddr>().ok())
                        .and_then(|address| networks.find(address))
                })
            }
            (List::Domains(domains), ffi::LUA_TSTRING) => {
                let text = bytes_at(state, 2);
                guarded(state, || std::str::from_utf8(text).ok().and_then(|name| domains.find(name)))
            }
            (List::Asns(asns), ffi::LUA_TNUMBER) => {
                let mut is_integer = 0;
                let asn = ffi::lua_tointegerx(state, 2, &mut is_integer);
                let asn = if is_integer != 0 {
                    asn
                } else {
                    ffi::lua_tonumberx(state, 2, std::ptr::null_mut()) as i64
                };
                guarded(state, || u32::try_from(asn).ok().and_then(|asn| asns.find(asn)))
            }
            (list, kind) => {
                let kind = ffi::lua_typename(state, kind);
                ffi::luaL_error(
                    state,
                    c"a list of %s cannot look up a %s".as_ptr(),
                    list.kind().as_ptr(),
                    kind,
                );
                None
            }
        };
        push_label(state, found)
    }
}

/// `list:claimed(ua)`: for a labelled network list, the label (crawler) the user agent names.
unsafe extern "C-unwind" fn list_claimed(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as in `list_find`.
    unsafe {
        let list = list_of(state, c"claimed");
        if !matches!(list, List::Networks(_) | List::Domains(_)) {
            ffi::luaL_error(
                state,
                c"claimed() needs a labelled network or domain list, not %s".as_ptr(),
                list.kind().as_ptr(),
            );
            return 0;
        }
        let found = match ffi::lua_type(state, 2) {
            ffi::LUA_TSTRING => {
                let text = bytes_at(state, 2);
                guarded(state, || match list {
                    List::Networks(networks) => networks.claimed(text),
                    List::Domains(domains) => domains.claimed(text),
                    _ => None,
                })
            }
            _ => None,
        };
        push_label(state, found)
    }
}

/// `list:len()`: the number of entries.
unsafe extern "C-unwind" fn list_len(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as in `list_find`.
    unsafe {
        let list = list_of(state, c"len");
        ffi::lua_pushinteger(state, ffi::lua_Integer::try_from(list.len()).unwrap_or(ffi::lua_Integer::MAX));
    }
    1
}

/// `browser(ua)`: family, major and minor version of the mainstream browser a user agent claims;
/// nothing when it claims none.
unsafe extern "C-unwind" fn browser(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as in `list_find`.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TSTRING {
            return 0;
        }
        let text = bytes_at(state, 1);
        let Some(claim) = guarded(state, || std::str::from_utf8(text).ok().and_then(browser_claim)) else {
            return 0;
        };
        ffi::lua_pushlstring(state, claim.family.as_ptr().cast(), claim.family.len());
        ffi::lua_pushinteger(state, ffi::lua_Integer::from(claim.major));
        ffi::lua_pushinteger(state, ffi::lua_Integer::from(claim.minor));
    }
    3
}

/// Runs `lookup`, which must not call into Lua; a panic in it becomes a Lua error, raised once
/// its frames are gone.
///
/// SAFETY: `state` is running a C function of this module, whose frame owns nothing that needs
/// dropping (the error longjmps past it).
unsafe fn guarded<T>(state: *mut ffi::lua_State, lookup: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(lookup)) {
        Ok(value) => value,
        Err(payload) => {
            drop(payload);
            // SAFETY: see above; `luaL_error` does not return.
            unsafe {
                ffi::luaL_error(state, c"internal error in a rules helper".as_ptr());
                std::hint::unreachable_unchecked()
            }
        }
    }
}

/// The bytes of the string at `index`, borrowed from Lua (valid while the value is on the stack).
///
/// SAFETY: the value at `index` is a string.
unsafe fn bytes_at<'a>(state: *mut ffi::lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: see above; `lua_tolstring` on a string neither converts nor allocates.
    unsafe {
        let mut len = 0;
        let text = ffi::lua_tolstring(state, index, &mut len);
        std::slice::from_raw_parts(text.cast::<u8>(), len)
    }
}

/// Pushes a found label (`true` for an empty one) or nil; returns the number of results.
///
/// SAFETY: `state` has a free stack slot (a C function starts with 20). May raise a memory error.
unsafe fn push_label(state: *mut ffi::lua_State, label: Option<&str>) -> c_int {
    // SAFETY: see above.
    unsafe {
        match label {
            None => ffi::lua_pushnil(state),
            Some("") => ffi::lua_pushboolean(state, 1),
            Some(label) => {
                ffi::lua_pushlstring(state, label.as_ptr().cast(), label.len());
            }
        }
    }
    1
}
