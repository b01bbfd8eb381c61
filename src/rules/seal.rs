//! Sealing a loaded script, so that nothing a rule does outlives its request: what the sandbox's
//! `seal` pass needs from Lua's C API (a function's upvalues, a table's real metatable), and the
//! check that no rule assigns a local the script declared outside it.
//!
//! After the script has loaded, `seal` (in `sandbox.lua`) walks everything the rules can reach
//! (the returned rules, the script's globals, and the upvalues of every Lua function among
//! them) and makes every table it finds read-only in place (metatables included; the objects
//! that use one get a private working copy). Tables cover growth (`seen[#seen +
//! 1] = ...`), but a rule could still assign an outer local (`count = count + 1`, `cache =
//! cache or {}`), which no table can see: so the bytecode of every function reached is read,
//! and a `SETUPVAL` on an upvalue that comes from outside the function is a load error naming the
//! variable. The debug library is not loaded in rule states and mlua offers no upvalue access, so
//! the two inspectors below are C functions; they are handed only to `seal`, which rules cannot
//! reach, and dropped with it.

#![allow(unsafe_code)]

use std::ffi::c_int;

use mlua::{Function, Lua, ffi};

/// The sandbox's inspectors: `upvalue(f, i)` (the name and value of a Lua function's `i`th
/// upvalue, or nothing) and `metatable(t)` (a table's metatable whatever its `__metatable`
/// field), and `set_metatable(t, mt)` (which ignores that field's protection).
pub(super) fn inspectors(lua: &Lua) -> mlua::Result<(Function, Function, Function)> {
    // SAFETY: each function below keeps to the C API's rules for a C function: it reads its
    // arguments, pushes at most two values (within LUA_MINSTACK) and returns their count. None
    // of them owns anything that needs dropping when a memory error unwinds through it.
    unsafe {
        Ok((
            lua.create_c_function(upvalue)?,
            lua.create_c_function(metatable)?,
            lua.create_c_function(set_metatable)?,
        ))
    }
}

/// `upvalue(f, i)`: the name and value of Lua function `f`'s upvalue `i`; nothing for C
/// functions, other values or an index past the last.
unsafe extern "C-unwind" fn upvalue(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack (see `inspectors`).
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TFUNCTION || ffi::lua_iscfunction(state, 1) != 0 {
            return 0;
        }
        let index = ffi::lua_tointegerx(state, 2, std::ptr::null_mut());
        let Ok(index) = c_int::try_from(index) else { return 0 };
        if index < 1 {
            return 0;
        }
        let name = ffi::lua_getupvalue(state, 1, index);
        if name.is_null() {
            return 0;
        }
        ffi::lua_pushstring(state, name);
        ffi::lua_rotate(state, -2, 1);
        2
    }
}

/// `metatable(t)`: the metatable of table `t`, or nothing.
unsafe extern "C-unwind" fn metatable(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack (see `inspectors`).
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            return 0;
        }
        ffi::lua_getmetatable(state, 1)
    }
}

/// `set_metatable(t, mt)`: sets table `t`'s metatable to table `mt`.
unsafe extern "C-unwind" fn set_metatable(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its arguments on the stack (see `inspectors`); the types are
    // checked before `lua_setmetatable` pops the second.
    unsafe {
        if ffi::lua_type(state, 1) == ffi::LUA_TTABLE && ffi::lua_type(state, 2) == ffi::LUA_TTABLE {
            ffi::lua_settop(state, 2);
            ffi::lua_setmetatable(state, 1);
        }
        0
    }
}

/// Why `function` cannot be a rule's: it, or a function defined inside it, assigns a local
/// declared outside `function` (state that would outlive the request, one copy per worker).
pub(super) fn outer_assignment(function: &Function) -> Option<String> {
    let info = function.info();
    if info.what != "Lua" {
        return None;
    }
    let dump = function.dump(false);
    let main = match read_chunk(&dump) {
        Ok(main) => main,
        // Not a chunk this reader knows: say so rather than let it through unchecked.
        Err(error) => return Some(format!("cannot read the function's bytecode ({error})")),
    };
    let outer = vec![true; main.upvalues.len()];
    let (name, line) = assigned(&main, &outer)?;
    let place = match (info.short_src, line) {
        (Some(source), Some(line)) => format!("{source}:{line}: "),
        _ => String::new(),
    };
    Some(format!(
        "{place}a rule assigns `{name}`, a local the script declared outside it: its value would outlive the request (one per rule worker); keep per-request values in the rule's own locals"
    ))
}

/// The first upvalue marked `outer` that `proto` or a function inside it assigns, with the line.
fn assigned(proto: &Proto, outer: &[bool]) -> Option<(String, Option<usize>)> {
    for (pc, instruction) in proto.code.iter().enumerate() {
        if instruction & 0x7f == OP_SETUPVAL {
            // iABC: A is 8 bits after the 7-bit opcode, then k (1 bit), then B (8 bits).
            let b = ((instruction >> 16) & 0xff) as usize;
            if outer.get(b).copied().unwrap_or(true) {
                let name = proto.upvalue_names.get(b).cloned().unwrap_or_else(|| "?".into());
                return Some((name, proto.line_of(pc)));
            }
        }
    }
    for child in &proto.protos {
        // A child's upvalue is the parent's local (in stack: a fresh one per call) or one of the
        // parent's own upvalues (outer if that one is).
        let child_outer: Vec<bool> = child
            .upvalues
            .iter()
            .map(|&(in_stack, index)| !in_stack && outer.get(usize::from(index)).copied().unwrap_or(true))
            .collect();
        if let Some(found) = assigned(child, &child_outer) {
            return Some(found);
        }
    }
    None
}

/// `OP_SETUPVAL` in Lua 5.4's opcode order (lopcodes.h).
const OP_SETUPVAL: u32 = 10;

/// What the check needs of one function prototype of a Lua 5.4 binary chunk.
#[derive(Debug, Default)]
struct Proto {
    code: Vec<u32>,
    /// Per upvalue: whether it is the enclosing function's local, and its index there.
    upvalues: Vec<(bool, u8)>,
    protos: Vec<Proto>,
    upvalue_names: Vec<String>,
    line_defined: usize,
    /// Relative line steps per instruction, and absolute lines at some instructions.
    line_steps: Vec<i8>,
    absolute_lines: Vec<(usize, usize)>,
}

impl Proto {
    /// The source line of instruction `pc` (ldebug.c's `luaG_getfuncline`).
    fn line_of(&self, pc: usize) -> Option<usize> {
        if self.line_steps.is_empty() {
            return None;
        }
        let (mut base_pc, mut line) = match self.absolute_lines.iter().rev().find(|(at, _)| *at <= pc) {
            Some(&(at, line)) => (at as isize, line as isize),
            None => (-1, self.line_defined as isize),
        };
        while base_pc < pc as isize {
            base_pc += 1;
            line += isize::from(*self.line_steps.get(usize::try_from(base_pc).ok()?)?);
        }
        usize::try_from(line).ok()
    }
}

/// A binary chunk's header: signature, version 5.4, format 0, the conversion check data, and
/// the sizes and test values of this build (4-byte instructions, 8-byte integers and floats).
const HEADER: &[u8] = b"\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08";

fn read_chunk(bytes: &[u8]) -> Result<Proto, String> {
    let rest = bytes.strip_prefix(HEADER).ok_or("not a Lua 5.4 chunk of this build")?;
    // LUAC_INT and LUAC_NUM, then the main function's upvalue count.
    let mut reader = Reader { bytes: rest, at: 16 };
    reader.byte()?;
    reader.function(0)
}

/// Reads `ldump.c`'s layout.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(count).filter(|end| *end <= self.bytes.len()).ok_or("cut short")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    /// `dumpSize`: seven bits a byte, most significant first, the last byte marked by 0x80.
    fn size(&mut self) -> Result<usize, String> {
        let mut value: usize = 0;
        loop {
            let byte = self.byte()?;
            value = value.checked_mul(128).ok_or("size overflows")? | usize::from(byte & 0x7f);
            if byte & 0x80 != 0 {
                return Ok(value);
            }
        }
    }

    fn string(&mut self) -> Result<Option<String>, String> {
        match self.size()? {
            0 => Ok(None),
            size => Ok(Some(String::from_utf8_lossy(self.take(size - 1)?).into_owned())),
        }
    }

    fn function(&mut self, depth: usize) -> Result<Proto, String> {
        if depth > 200 {
            return Err("functions nested too deep".into());
        }
        let mut proto = Proto::default();
        self.string()?; // source
        proto.line_defined = self.size()?;
        self.size()?; // last line defined
        self.take(3)?; // parameters, vararg flag, stack size
        let instructions = self.size()?;
        proto.code = self
            .take(instructions.checked_mul(4).ok_or("code too large")?)?
            .chunks_exact(4)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();
        for _ in 0..self.size()? {
            match self.byte()? {
                // Float, integer: eight bytes.
                0x13 | 0x03 => {
                    self.take(8)?;
                }
                // Short, long string.
                0x04 | 0x14 => {
                    self.string()?;
                }
                // nil, false, true.
                0x00 | 0x01 | 0x11 => {}
                tag => return Err(format!("unknown constant type {tag:#x}")),
            }
        }
        for _ in 0..self.size()? {
            let entry = self.take(3)?;
            proto.upvalues.push((entry[0] != 0, entry[1]));
        }
        for _ in 0..self.size()? {
            let child = self.function(depth + 1)?;
            proto.protos.push(child);
        }
        let steps = self.size()?;
        proto.line_steps = self.take(steps)?.iter().map(|&step| step as i8).collect();
        for _ in 0..self.size()? {
            let pc = self.size()?;
            let line = self.size()?;
            proto.absolute_lines.push((pc, line));
        }
        for _ in 0..self.size()? {
            self.string()?;
            self.size()?;
            self.size()?;
        }
        for _ in 0..self.size()? {
            let name = self.string()?.unwrap_or_default();
            proto.upvalue_names.push(name);
        }
        Ok(proto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(lua: &Lua, source: &str) -> Function {
        lua.load(source).set_name("@rules.lua").eval().unwrap()
    }

    #[test]
    fn assigning_an_outer_local_is_found_with_its_name_and_line() {
        let lua = Lua::new();
        let counting = function(&lua, "local count = 0\nreturn function(r)\n  count = count + 1\nend");
        let reason = outer_assignment(&counting).unwrap();
        assert!(reason.starts_with("rules.lua:3: a rule assigns `count`"), "{reason}");
        // Inside a function defined in the rule, assigning the outer local is found too.
        let nested = function(
            &lua,
            "local cache\nreturn function(r)\n  local f = function() cache = {} end\n  f()\nend",
        );
        assert!(outer_assignment(&nested).unwrap().contains("`cache`"));
    }

    #[test]
    fn the_rules_own_locals_and_globals_are_not_outer_assignments() {
        let lua = Lua::new();
        let own = function(
            &lua,
            "local limit = 5\nreturn function(r)\n  local n = 0\n  local bump = function() n = n + 1 end\n  bump()\n  note = n\n  return n < limit\nend",
        );
        assert_eq!(outer_assignment(&own), None);
        let native: Function = lua.globals().get("print").unwrap();
        assert_eq!(outer_assignment(&native), None);
    }

    #[test]
    fn every_constant_kind_and_nested_function_reads() {
        let lua = Lua::new();
        let busy = function(
            &lua,
            "local x = 1\nreturn function(r)\n  local t = { 1, 2.5, 'short', string.rep('l', 100), true, false, nil }\n  local function a() local function b() return t end return b end\n  return a, x\nend",
        );
        assert_eq!(outer_assignment(&busy), None);
        let deep = function(
            &lua,
            "local x = 1\nreturn function(r)\n  local function a() local function b() x = 2 end return b end\n  return a\nend",
        );
        assert!(outer_assignment(&deep).unwrap().contains("`x`"));
    }
}
