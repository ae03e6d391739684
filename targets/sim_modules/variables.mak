SRC_DIR = /work/main/.venv/lib/python3.11/site-packages/litex/build/sim/core
INC_DIR = 
TAPCFG_DIRECTORY = /work/main/.venv/lib/python3.11/site-packages/pythondata_misc_tapcfg/data

EXTRA_MOD_LIST = hilat_serial2tcp
EXTRA_MOD_BASE_DIR = /work/main/targets/sim_modules
