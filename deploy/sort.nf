#!/usr/bin/env nextflow
// One `dspk sort` per probe, each in the dspk container on one GPU: the shape of a sorting
// step in a Nextflow pipeline such as AIND's ephys pipeline (deploy/README.md).
//
//   nextflow run deploy/sort.nf -with-docker --recordings 'data/*.bin' --probe chanMap.mat \
//       --n_chan_bin 385 --fs 30000
//
// Each recording is one plain binary file (Kilosort's way: --n_chan_bin, --fs) that the task
// stages alone, sorted through the --probe file. Formats whose metadata sit in other files
// (SpikeGLX's .meta, dspk's sidecar, Open Ephys' folders) need those staged too, which this
// process does not do. Results: one Phy folder per recording under --outdir.

nextflow.enable.dsl = 2

params.recordings = null
params.probe = null
params.n_chan_bin = null
params.fs = null
params.settings = ''            // e.g. '--set Th_learned=7 --set nblocks=5'
params.outdir = 'sorted'
params.container = 'dspk:latest'
params.gpu_option = '--gpus all'  // Docker's; '--nv' for Apptainer/Singularity

process DSPK_SORT {
    tag "${recording.baseName}"
    container params.container
    containerOptions params.gpu_option
    accelerator 1
    publishDir params.outdir, mode: 'copy'

    input:
    path recording
    path probe

    output:
    path "${recording.baseName}_sorted"

    script:
    """
    dspk sort ${recording} --n-chan-bin ${params.n_chan_bin} --fs ${params.fs} --probe ${probe} ${params.settings} --out ${recording.baseName}_sorted
    """
}

workflow {
    if (!params.recordings || !params.probe || !params.n_chan_bin || !params.fs) {
        error "give --recordings (a glob, one file per probe), --probe, --n_chan_bin and --fs"
    }
    recordings = Channel.fromPath(params.recordings, checkIfExists: true)
    probe = file(params.probe, checkIfExists: true)
    DSPK_SORT(recordings, probe)
}
