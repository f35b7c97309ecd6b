//! SpikeGLX recordings (`.bin` + `.meta`).
