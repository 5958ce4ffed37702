// The job `ringmaster-trainer train` runs when no --config is given: a small BERT trained from
// scratch on the generated demo data, sized to finish on a laptop CPU in minutes.
#pragma once

#include <string>

namespace ringmaster::trainer {

// YAML text of the demo job. Its paths (runs/demo/data/{vocab.txt,train.tsv,dev.tsv},
// runs/demo) are relative: pass the run root as ParseJobSpec's base_dir.
std::string DefaultDemoJobYaml();

}  // namespace ringmaster::trainer
