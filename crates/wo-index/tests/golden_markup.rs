//! Output pinned byte for byte on the inputs the text and code fast paths touch: HTML written
//! every way the tokenizer reads differently (character references with and without `;`,
//! numeric ones in the replaced ranges, CR and CRLF line ends, comments of every shape,
//! doctypes, CDATA, processing instructions, stray `<` and `</`, raw-text and RCDATA elements,
//! `<script>` with `<!--` inside, dropped foreign content with HTML that breaks out of it,
//! upper-case and unclosed tags, attributes quoted, unquoted and with `>` inside, NUL bytes,
//! a tag cut by the end of the file), plain text and minified JavaScript on one very long
//! line. The SHA-256 of `index.json` and of every pack file is held to a snapshot taken with
//! the code before the HTML fast path and the long-line work
//! (`snapshots/golden_markup__markup_digests.snap`), on 1 and 3 threads.

mod common;

use std::fmt::Write as _;
use std::path::Path;

use common::{digests, index_and_pack, write};
use wo_index::IndexOptions;

/// HTML pages, each stressing one part of the tokenizer, plus long-line code and text.
fn fixture(root: &Path) {
    let pages: &[(&str, &str)] = &[
        (
            "refs.html",
            "<p>a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &nbsp;f&copy g &copyx h &notin; i \
             &noti; j &amp k &ampx; l &#65;&#x42;&#X43; &#0; &#x80; &#x9F; &#xD800; &#x110000; \
             &#128512; &#65 m &# n &#x; o &unknown; p &AMP; &LT q & r &&amp; s</p>\n\
             <h2>Head &amp; &lt;tail&gt; &#x2014; done</h2>\n<p>&CounterClockwiseContourIntegral; \
             &zwnj;&zwj; &NotNestedGreaterGreater; &fjlig;</p>\n",
        ),
        (
            "lines.html",
            "<h1>One\r\nTwo</h1>\r\n<p>crlf\r\nline\rlone cr\r\rdouble</p>\r\n<div\r\nclass=\"x\"\r\n>after\
             \n\n\n</div><pre>\n  keep\n\tindent\n</pre>\r",
        ),
        (
            "comments.html",
            "<!doctype html><!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0//EN\" 'x>y'>\n\
             <p>a<!-- c -->b<!---->c<!-->d<!--->e<!-- x -- y -->f<!-- x --!>g<!-- a <!-- b -->h\
             <!--- z --->i</p>\n<p><![CDATA[ cdata > text ]]>j<?php echo 1 ?>k<!bogus>l</p>\n\
             <p>m < n <= o <3 p</> q </ r> s </3 t <a</p>\n<!-- unterminated",
        ),
        (
            "raw.html",
            "<title>T &amp; <b>not</b> tag</title><TITLE>Second</TITLE>\n<style>p { x: '</p>' }\
             </style >after style\n<script>if (a<b) { s = '<!-- <script> x </script> -->'; }\
             </script>after script\n<script>var s = \"</scr\" + \"ipt>\";</script>tail\n\
             <textarea>t <b>x</b> &lt;</textarea>text\n<xmp><b>raw</b></xmp>x\
             <noscript><p>ns</p></noscript>y <iframe><p>if</p></iframe>z\n\
             <script>unclosed <p>never text",
        ),
        (
            "foreign.html",
            "<p>before</p><svg><style>s</style><text>svg text</text><p>breaks out</p>after\n\
             <math><mi>x</mi></math>m <svg/>selfclosed visible <svg><svg></svg>inner</svg>out\n\
             <select><option>o</option></select>sel <template><p>t</p></template>tpl\n\
             <object><p>obj</p></object>ob <svg><font color=red>font</font></svg>f\n",
        ),
        (
            "tags.html",
            "<DIV CLASS=\"a>b\" data-x='c>d' e=f>g</DIV><p/>self<br/>br<BR>BR<p\tid=1\n>tab\n\
             <p id=\"unterminated>never closed</p> rest\n<p a b c=d e='f' g=\"h\" / >sp</p>\
             <a href=x?y=1&z=2>link</a><img src=a alt=\"<p>\">img\n<h3 id=h>Three<h4>Four</h4>\
             </h3>after<h7>not</h7><H5>Five</H5><td>c1<th>c2<tr>row\n\
             <p>caf\u{e9} \u{65e5}\u{672c} \u{1f600}</p><h1>unclosed heading",
        ),
        ("cut.html", "<p>text before a cut <a href=\"x"),
        ("cut2.html", "<h2>cut in heading <b"),
        ("empty.html", ""),
        (
            "plaintext.html",
            "<p>a</p><plaintext><p>b</p>&amp;\n</plaintext>c",
        ),
    ];
    for (name, text) in pages {
        write(root, &format!("html/{name}"), text);
    }
    // Attributes past the tokenizer's cap.
    let mut attrs = String::from("<p");
    for i in 0..300 {
        let _ = write!(attrs, " a{i}=\"v{i}\"");
    }
    attrs.push_str(">many attributes</p>\n");
    write(root, "html/attrs.html", &attrs);
    // NUL bytes past the binary sniff's first 8 KiB: in text, in a tag name, in an attribute,
    // in a comment and in raw text.
    let mut nul = "<p>padding words</p>\n".repeat(500);
    nul.push_str("<p>a\u{0}b</p><p\u{0}x>n</p\u{0}><p t=\"\u{0}\">v</p><!-- \u{0} -->w<style>\u{0}</style>z\n");
    write(root, "html/nul.html", &nul);
    // A documentation-like page: long, tag-heavy, with sections.
    let mut doc = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Doc</title></head><body>\n",
    );
    for s in 0..60 {
        let _ = write!(
            doc,
            "<section id=\"s{s}\"><h2 class=\"section-header\"><a href=\"#s{s}\" class=\"anchor\">\u{a7}</a>Section {s}</h2>\n\
             <div class=\"docblock\"><p>Paragraph {s} with <code>code_{s}</code>, <em>emphasis</em> &amp; a \
             <a href=\"https://example.com/{s}?a=1&amp;b=2\">link</a>.</p>\n<pre class=\"rust\"><code>\
             <span class=\"kw\">fn</span> f{s}() -&gt; u32 {{ {s} }}</code></pre></div></section>\n"
        );
    }
    doc.push_str("</body></html>\n");
    write(root, "html/doc.html", &doc);
    // Minified JavaScript: one line far over the chunk cap, and a bundle of long lines.
    let mut min = String::new();
    for i in 0..4000 {
        let _ = write!(
            min,
            "function f{i}(a,b){{return a*{i}+b}}var v{i}=f{i}(1,2);"
        );
    }
    write(root, "js/app.min.js", &min);
    let mut bundle = String::new();
    for l in 0..20 {
        for i in 0..300 {
            let _ = write!(bundle, "const x{l}_{i}=\"{}\";", "s".repeat(i % 17));
        }
        bundle.push('\n');
    }
    write(root, "js/bundle.js", &bundle);
    // Text with a very long line of non-ASCII words and one without spaces.
    let mut long = "mot\u{e9} ".repeat(3000);
    long.push('\n');
    long.push_str(&"x".repeat(20_000));
    long.push('\n');
    write(root, "text/long.txt", &long);
}

/// What the golden test pins for `root` indexed on `threads` threads.
fn outputs(root: &Path, threads: usize) -> Vec<(String, Vec<u8>)> {
    let opts = IndexOptions {
        threads,
        ..IndexOptions::default()
    };
    index_and_pack(root, &opts, "golden-markup")
}

#[test]
fn markup_and_long_line_output_is_pinned() {
    let one = tempfile::tempdir().unwrap();
    let three = tempfile::tempdir().unwrap();
    fixture(one.path());
    fixture(three.path());
    let a = outputs(one.path(), 1);
    let b = outputs(three.path(), 3);
    assert_eq!(digests(&a), digests(&b), "1 thread vs 3 threads");
    assert!(a == b, "same digests, different bytes");
    insta::assert_snapshot!("markup_digests", digests(&a));
}
