// Gradient compression for the data-parallel wire, one header for its three parts:
//  - wire_codec.h: element codecs (fp16, bf16, blockwise int8, each with optional error feedback);
//  - two_stage_allreduce.h: the all-reduce that sends every byte through a codec;
//  - powersgd.h: PowerSGD low-rank compression with sum semantics.
// Pure computation: nothing here communicates except through the callbacks the caller passes.
#pragma once

#include "trainer/parallel/powersgd.h"
#include "trainer/parallel/two_stage_allreduce.h"
#include "trainer/parallel/wire_codec.h"
