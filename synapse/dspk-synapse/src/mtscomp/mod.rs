//! mtscomp-compressed recordings (`.cbin` + `.ch`).
