//! Picks the replay corpus from the frames brokers captured (`scripts/capture-frames.sh` runs it):
//! `collect_frames <capture dir> <corpus dir>` reads `<capture dir>/<suite>/*.bin`, keeps what
//! `skiff_tests::corpus::select` keeps, and replaces `<corpus dir>` with them, one directory per
//! suite. Prints what it kept and every frame the broker's decoder refuses.

use std::path::PathBuf;

use skiff_tests::corpus::{read_frames, select, FrameKind};

fn main() -> anyhow::Result<()> {
    let mut arguments = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(captured), Some(corpus)) = (arguments.next(), arguments.next()) else {
        anyhow::bail!("usage: collect_frames <capture dir> <corpus dir>");
    };
    let frames = read_frames(&captured)?;
    let captured_count = frames.len();
    let kept = select(frames);
    if corpus.exists() {
        std::fs::remove_dir_all(&corpus)?;
    }
    let mut bytes = 0usize;
    for frame in &kept {
        let dir = corpus.join(&frame.suite);
        std::fs::create_dir_all(&dir)?;
        let name = frame.path.file_name().expect("a captured file has a name");
        std::fs::write(dir.join(name), &frame.frame)?;
        bytes += frame.frame.len();
        match frame.kind() {
            FrameKind::Answered => {}
            FrameKind::ApiVersionsAboveMax => {
                println!("{}/{:?}: ApiVersions above the broker's", frame.suite, name)
            }
            FrameKind::BytesPastSchema(rest) => {
                println!("{}/{:?}: {rest} bytes past the schema", frame.suite, name)
            }
            FrameKind::Refused(reason) => {
                println!("{}/{:?}: REFUSED: {reason}", frame.suite, name)
            }
        }
    }
    println!(
        "kept {} of {captured_count} captured frames ({bytes} bytes) in {}",
        kept.len(),
        corpus.display()
    );
    Ok(())
}
