//! The rule driver: the Lua function that runs every rule of a ruleset in one call, and the call
//! into it on the request path.
//!
//! The call goes through Lua's C API rather than mlua's `Function::call`. With a memory limit
//! set, mlua pushes a string argument in a protected call of its own and moves every argument
//! and result through its reference stack: about 6k instructions per evaluation, a sixth of
//! the whole. Here one `lua_pcall` runs a small C function that pushes the request (inside the
//! protected call, so running out of memory is a rule error, not an abort) and calls the driver.

#![allow(unsafe_code)]

use std::ffi::c_int;

use mlua::{Function, Lua, ffi};

use super::wire::Request;

/// The driver's source. A request crosses from Rust into Lua once, not once per rule. The chunk
/// takes the rules' check functions and the sandbox's `reset` (which forgets the globals the last
/// request wrote), and returns four functions:
/// - `evaluate` takes the request and runs the rules. The request's text comes as one string
///   with the end offsets of its fields (see `Request`). It returns the deciding rule's index (0
///   for none), a code (1 for allow, `CODE_TRAP`, `CODE_CHALLENGE`) and the reason. The fields every default rule
///   reads (proto, path, User-Agent) come as strings of their own as well. When tracing, it
///   records every rule's result as `index, result, ...` in a table that `last_trace` returns.
/// - A rule's error is not caught in Lua (a `pcall` around the rules would cost every request)
///   but returns to Rust, which calls `failed(message)` to record it and learn the failed rule's
///   index (0 when no rule was running),
/// - and then, under fail-open, `resume()` to run the rules after it, with the same request.
pub(super) const SOURCE: &str = include_str!("driver.lua");

/// The driver's code for a trap decision.
pub(super) const CODE_TRAP: u8 = 2;
/// The driver's code for a challenge verdict.
pub(super) const CODE_CHALLENGE: u8 = 3;

/// Why a call into the driver failed: the error's text, and whether Lua ran out of memory (a
/// status of its own, which no rule can raise).
pub(super) struct CallError {
    pub(super) text: String,
    pub(super) out_of_memory: bool,
}

/// What `evaluate` returned.
pub(super) struct DriverOutcome {
    /// The deciding rule's index, from 1; 0 when no rule decided.
    pub(super) index: usize,
    /// 1 for allow, `CODE_TRAP` for trap, `CODE_CHALLENGE` for a challenge, 0 when no rule decided.
    pub(super) code: u8,
    pub(super) reason: Option<String>,
}

/// The driver's `evaluate` and `resume` in one thread's Lua state, called through the C API.
pub(super) struct Driver {
    state: *mut ffi::lua_State,
    /// Registry references to `evaluate`, `resume`, and `tostring` for error objects.
    evaluate: c_int,
    resume: c_int,
    tostring: c_int,
}

/// Arguments of `evaluate`.
const ARGUMENTS: c_int = 26;

/// Stack slots the call needs: the C function and its argument, then the driver and its
/// arguments.
const STACK_NEEDED: c_int = ARGUMENTS + 3;

impl Driver {
    /// Keeps the driver's `evaluate` and `resume` for calls through the C API.
    pub(super) fn new(lua: &Lua, evaluate: Function, resume: Function) -> mlua::Result<Driver> {
        let tostring: Function = lua.globals().get("tostring")?;
        let (mut state, mut refs) = (std::ptr::null_mut(), [0; 3]);
        // SAFETY: references the three functions pushed as arguments (popping them, the last
        // first). `luaL_ref` raises only on a memory error, which `exec_raw`'s protected call
        // turns into an `Err`; this closure owns nothing that needs dropping. `exec_raw` runs on
        // the main state, where calls from Rust run.
        unsafe {
            lua.exec_raw::<()>((evaluate, resume, tostring), |raw| {
                for reference in refs.iter_mut().rev() {
                    *reference = ffi::luaL_ref(raw, ffi::LUA_REGISTRYINDEX);
                }
                state = raw;
            })?;
        }
        let [evaluate, resume, tostring] = refs;
        Ok(Driver { state, evaluate, resume, tostring })
    }

    /// Runs the rules on `request`; on an error, calls `on_error` (which must lift a time-limit
    /// stop, or describing the error would be stopped too) and returns the error's text.
    pub(super) fn evaluate(
        &self,
        request: &Request,
        on_error: impl FnOnce(),
    ) -> Result<DriverOutcome, CallError> {
        self.call(Call { function: self.evaluate, request: Some(request) }, on_error)
    }

    /// Runs the rules after the one that failed, on the same request; errors as in `evaluate`.
    pub(super) fn resume(&self, on_error: impl FnOnce()) -> Result<DriverOutcome, CallError> {
        self.call(Call { function: self.resume, request: None }, on_error)
    }

    fn call(&self, call: Call, on_error: impl FnOnce()) -> Result<DriverOutcome, CallError> {
        let state = self.state;
        // SAFETY: the state belongs to this thread, which is not inside any other Lua call, and
        // the stack is restored to `top` before returning. `push_and_call` gets a pointer to
        // `call`, which outlives the protected call.
        unsafe {
            let top = ffi::lua_gettop(state);
            if ffi::lua_checkstack(state, STACK_NEEDED) == 0 {
                return Err(CallError { text: "the Lua stack is full".into(), out_of_memory: false });
            }
            ffi::lua_pushcfunction(state, push_and_call);
            ffi::lua_pushlightuserdata(state, std::ptr::from_ref(&call).cast_mut().cast());
            let status = ffi::lua_pcall(state, 1, 3, 0);
            let result = if status == ffi::LUA_OK {
                Ok(DriverOutcome {
                    index: usize::try_from(ffi::lua_tointegerx(state, top + 1, std::ptr::null_mut()))
                        .unwrap_or(0),
                    code: u8::try_from(ffi::lua_tointegerx(state, top + 2, std::ptr::null_mut()))
                        .unwrap_or(0),
                    reason: string_at(state, top + 3),
                })
            } else {
                on_error();
                Err(CallError { text: self.error_text(top + 1), out_of_memory: status == ffi::LUA_ERRMEM })
            };
            ffi::lua_settop(state, top);
            result
        }
    }

    /// The text of the error object at `index`, through `tostring` for a non-string (a rule may
    /// raise any value, such as a table with a `__tostring`).
    ///
    /// SAFETY: `index` is the stack's top, with a free slot above it.
    unsafe fn error_text(&self, index: c_int) -> String {
        let state = self.state;
        // SAFETY: see above; the call to `tostring` is protected.
        unsafe {
            if let Some(text) = string_at(state, index) {
                return text;
            }
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, ffi::lua_Integer::from(self.tostring));
            ffi::lua_pushvalue(state, index);
            let described = ffi::lua_pcall(state, 1, 1, 0) == ffi::LUA_OK;
            let text = if described { string_at(state, -1) } else { None };
            text.unwrap_or_else(|| "an error that cannot be described".into())
        }
    }
}

/// What `push_and_call` needs, passed as a light userdata: the driver function, and the request
/// for `evaluate` (`resume` takes none).
struct Call<'a> {
    function: c_int,
    request: Option<&'a Request<'a>>,
}

/// Pushes the request (if any) and calls the driver function, inside `Driver::call`'s protected
/// call.
unsafe extern "C-unwind" fn push_and_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: `Driver::call` passes a `Call` that outlives this call. An error in the driver
    // unwinds (longjmp) past this frame, which owns nothing that needs dropping.
    unsafe {
        let call = &*ffi::lua_touserdata(state, 1).cast::<Call>();
        if ffi::lua_checkstack(state, STACK_NEEDED) == 0 {
            ffi::luaL_error(state, c"the Lua stack is full".as_ptr());
        }
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, ffi::lua_Integer::from(call.function));
        let Some(request) = call.request else {
            ffi::lua_call(state, 0, 3);
            return 3;
        };
        ffi::lua_pushboolean(state, c_int::from(request.tracing));
        let text = request.text;
        ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
        // The fields every default rule reads, pushed whole rather than cut in Lua: proto,
        // path and User-Agent.
        let [_, proto_end, host_end, path_end, uri_end, agent_end, ..] = request.ends;
        for (from, to) in [(request.ends[0], proto_end), (host_end, path_end), (uri_end, agent_end)] {
            let field = text.as_bytes().get(from..to).unwrap_or_default();
            ffi::lua_pushlstring(state, field.as_ptr().cast(), field.len());
        }
        for end in request.ends {
            ffi::lua_pushinteger(state, ffi::lua_Integer::try_from(end).unwrap_or(ffi::lua_Integer::MAX));
        }
        ffi::lua_pushinteger(
            state,
            ffi::lua_Integer::try_from(request.trap_hits).unwrap_or(ffi::lua_Integer::MAX),
        );
        ffi::lua_pushnumber(state, request.trap_score);
        ffi::lua_pushnumber(state, request.request_rate);
        ffi::lua_pushinteger(state, request.packed);
        ffi::lua_pushinteger(state, request.shown);
        ffi::lua_call(state, ARGUMENTS, 3);
    }
    3
}

/// The string at `index`, if the value there is a string (numbers are not converted: that would
/// allocate outside a protected call).
///
/// SAFETY: `index` is a valid stack index of `state`.
unsafe fn string_at(state: *mut ffi::lua_State, index: c_int) -> Option<String> {
    // SAFETY: see above; `lua_tolstring` on a string neither allocates nor raises.
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TSTRING {
            return None;
        }
        let mut len = 0;
        let text = ffi::lua_tolstring(state, index, &mut len);
        Some(String::from_utf8_lossy(std::slice::from_raw_parts(text.cast::<u8>(), len)).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters of driver.lua's `evaluate`, in order.
    fn lua_parameters() -> Vec<String> {
        let start = SOURCE.find("local function evaluate(").expect("driver.lua defines evaluate") + 24;
        let end = start + SOURCE[start..].find(')').unwrap();
        SOURCE[start..end].split(',').map(|name| name.trim().to_string()).collect()
    }

    #[test]
    fn rust_and_the_lua_driver_agree_on_the_arguments_and_the_field_ends() {
        let parameters = lua_parameters();
        // What Rust pushes (see `evaluate` above) is what the driver takes, by count and by kind.
        assert_eq!(parameters.len(), ARGUMENTS as usize, "{parameters:?}");
        let ends: Vec<&String> = parameters.iter().filter(|name| name.ends_with("_end")).collect();
        let request = Request {
            tracing: false,
            text: "",
            ends: [0; super::super::wire::FIELDS],
            trap_hits: 0,
            trap_score: 0.0,
            request_rate: 0.0,
            packed: 0,
            shown: 0,
        };
        assert_eq!(ends.len(), request.ends.len(), "{ends:?}");
        // push_and_call pushes the flag, the text, three fields, the ends and five numbers.
        assert_eq!(ARGUMENTS as usize, 2 + 3 + request.ends.len() + 5);
        // The field ends come together, after the five leading arguments, and the driver uses
        // every one of them.
        let first = parameters.iter().position(|name| name.ends_with("_end")).unwrap();
        assert_eq!(first, 5, "{parameters:?}");
        assert!(parameters[first..first + ends.len()].iter().all(|name| name.ends_with("_end")));
        for end in ends {
            assert!(SOURCE.matches(end.as_str()).count() >= 2, "driver.lua takes {end} but never uses it");
        }
        assert_eq!(&parameters[..5], ["tracing", "text", "proto", "path", "user_agent"]);
        assert_eq!(
            &parameters[first + super::super::wire::FIELDS..],
            ["trap_hits", "trap_score", "request_rate", "packed", "optional"]
        );
    }
}
