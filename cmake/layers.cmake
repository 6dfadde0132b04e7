# The layer DAG, declared once (docs/ARCHITECTURE.md, "How the build keeps the layers"). Each entry is
#   NAME|PATH PREFIX|LIBRARY|LAYERS IT MAY INCLUDE (comma-separated)
# A file belongs to the layer with the longest path prefix that matches it. A file may include headers of its own
# layer and of the layers listed (the list is the whole of what it may reach: nothing is implied transitively), and
# the layer's library links exactly the libraries of the layers its files do include. cmake/check_layers.cmake
# checks both on every build and in CTest (layers_check).
set(QINFER_LAYERS
    "util|src/util/|qinfer_util|"
    "model|src/model/|qinfer_model|util"
    "hub|src/hub/|qinfer_hub|model,util"
    "tokenizer|src/tokenizer/|qinfer_tokenizer|util"
    "chat_template|src/chat_template/|qinfer_chat_template|util"
    "grammar|src/grammar/|qinfer_grammar|tokenizer,util"
    "backend|src/backend/|qinfer_backend_core|model,util"
    "backend/parallel|src/backend/parallel/|qinfer_backend_parallel|util"
    "backend/nccl|src/backend/parallel/nccl_communicator|qinfer_backend_nccl|backend/parallel,util"
    "backend/cpu|src/backend/cpu/|qinfer_backend_cpu|backend,backend/parallel,model,util"
    "backend/cuda|src/backend/cuda/|qinfer_backend_cuda|backend,backend/nccl,backend/parallel,model,util"
    "backend/factory|src/backend/factory|qinfer_backend|backend,backend/cpu,backend/cuda,model,util"
    "engine|src/engine/|qinfer_engine|backend,grammar,model,util"
    "engine/text|src/engine/tokenizer_text_decoder|qinfer_engine_text|engine,tokenizer,util"
    "loadgen|src/loadgen/|qinfer_loadgen|tokenizer,util"
    "server|src/server/|qinfer_server|backend,chat_template,engine,engine/text,grammar,model,tokenizer,util"
    "cli|src/cli/|qinfer_cli|backend,backend/cuda,backend/factory,chat_template,engine,engine/text,grammar,hub,loadgen,model,server,tokenizer,util"
    "testing|tests/testing/|qinfer_testing|backend,backend/cpu,backend/cuda,backend/factory,chat_template,engine,engine/text,grammar,hub,loadgen,model,server,tokenizer,util")
# Headers written into the build tree at build time; an include of one counts as a file of the including folder.
set(QINFER_GENERATED_HEADERS git_commit.h)
