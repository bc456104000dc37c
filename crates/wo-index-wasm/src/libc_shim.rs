//! The malloc family for tree-sitter's C on wasm32-unknown-unknown (no libc there): each
//! block is a Rust allocation with a 16-byte header holding its size, since `free` and
//! `realloc` are not told the size and Rust's allocator needs it. The rest of the C library
//! the C needs is `libc_shim.c` (build.rs).

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc, realloc as rust_realloc};

/// Header size and alignment: C's `max_align_t` on wasm32 is 16 bytes.
const HEADER: usize = 16;

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, HEADER).ok()
}

/// Stores `size` in the header at `base` and returns the user pointer after it.
unsafe fn finish(base: *mut u8, size: usize) -> *mut u8 {
    if base.is_null() {
        return base;
    }
    // SAFETY: `base` is a fresh allocation of at least HEADER bytes, 16-aligned.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(HEADER)
    }
}

/// C `malloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut u8 {
    match layout(size) {
        // SAFETY: the layout has a non-zero size (the header).
        Some(l) => unsafe { finish(alloc(l), size) },
        None => std::ptr::null_mut(),
    }
}

/// C `calloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut u8 {
    match n
        .checked_mul(size)
        .and_then(|total| Some((total, layout(total)?)))
    {
        // SAFETY: as in `malloc`.
        Some((total, l)) => unsafe { finish(alloc_zeroed(l), total) },
        None => std::ptr::null_mut(),
    }
}

/// C `free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `ptr` came from `malloc`/`calloc`/`realloc` here, so a header precedes it.
    unsafe {
        let base = ptr.sub(HEADER);
        let size = base.cast::<usize>().read();
        dealloc(
            base,
            Layout::from_size_align_unchecked(size + HEADER, HEADER),
        );
    }
}

/// C `realloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        // SAFETY: as in `malloc`.
        return unsafe { malloc(size) };
    }
    let Some(new) = layout(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `ptr` came from here (header before it); the new size is non-zero.
    unsafe {
        let base = ptr.sub(HEADER);
        let old = base.cast::<usize>().read();
        let grown = rust_realloc(
            base,
            Layout::from_size_align_unchecked(old + HEADER, HEADER),
            new.size(),
        );
        finish(grown, size)
    }
}
