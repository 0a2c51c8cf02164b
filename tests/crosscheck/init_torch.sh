# init_torch.sh: --init takes what a PyTorch user has. tests/crosscheck/init_torch.py
# has torch 1.13 write nn.Sequential state_dicts (F16; BF16 after an nn.Flatten, so
# numbered from 1; F64 with BatchNorm1d) beside their .to(torch.float32), and every
# float16 and bfloat16 bit pattern and 2^18 float64 values beside torch's conversion:
# our loader must give torch's bits, every element. Then build/chapter-6 starts from
# a torch F64 file and its banner says from which file and how it was read. Needs
# Debian's python3-torch (only /usr/bin/python3 imports it); runs in the plain suite
# only. (The unit suite checks the committed copies, init_torch.py --fixture.)
. "$(dirname "$0")/../harness/lib.sh"
dir="$T_TMP/init"
t_python_expected torch_init tests/crosscheck/init_torch.py "$dir" || exit 0
t_out torch_files_load_bit_for_bit "PASS test_checkpoint.checkpoint_init_takes_torch_files" \
    env DDP_INIT_DIR="$dir" "$BUILD/tests/unit/test_checkpoint" checkpoint_init_takes_torch_files
t_out every_conversion_equals_torch "PASS test_safetensors.safetensors_read_f32_equals_torch" \
    env DDP_INIT_DIR="$dir" "$BUILD/tests/unit/test_safetensors" safetensors_read_f32_equals_torch
banner="initial parameters from $dir/ch6_f64.safetensors (nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3;"
banner+=" F64 converted to float32, rounding to nearest even)"
t_out chapter6_starts_from_torch_file "$banner" "$BUILD/chapter-6" --hidden=9,6 --init="$dir/ch6_f64.safetensors" \
    --train-size=512 --epochs=1 --batch=32 --test-data=none --out="$T_TMP/out" --steps=2
