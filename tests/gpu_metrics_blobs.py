"""gpu_metrics tables built byte for byte from the Linux kernel's ``kgd_pp_interface.h`` (torvalds/linux,
drivers/gpu/drm/amd/include/kgd_pp_interface.h): each ``struct gpu_metrics_vX_Y`` written out field by
field as a little-endian ``struct`` format with the padding the C rules put in ('x' bytes), independently of
the ctypes layouts in oto.hardware.telemetry, so a test decoding these blobs checks those layouts.

Only the fields oto reads get values; every other field is 0xFFFF.../0 as the driver leaves unfilled ones
(smu_cmn_init_soft_gpu_metrics memsets the table to 0xFF and then fills the header).
"""

from __future__ import annotations

import struct

# (format revision, content revision): [(field, struct code, count)], in declaration order, with explicit
# padding entries ("pad", "x", n) where the C compiler inserts them on x86-64.
_V2_TEMPS = [("temperature_gfx", "H", 1), ("temperature_soc", "H", 1), ("temperature_core", "H", 8),
             ("temperature_l3", "H", 2)]  # fmt: skip
_V2_POWER = [("average_socket_power", "H", 1), ("average_cpu_power", "H", 1), ("average_soc_power", "H", 1),
             ("average_gfx_power", "H", 1), ("average_core_power", "H", 8)]  # fmt: skip
_V2_CLOCKS = [("average_gfxclk_frequency", "H", 1), ("average_socclk_frequency", "H", 1),
              ("average_uclk_frequency", "H", 1), ("average_fclk_frequency", "H", 1),
              ("average_vclk_frequency", "H", 1), ("average_dclk_frequency", "H", 1),
              ("current_gfxclk", "H", 1), ("current_socclk", "H", 1), ("current_uclk", "H", 1),
              ("current_fclk", "H", 1), ("current_vclk", "H", 1), ("current_dclk", "H", 1),
              ("current_coreclk", "H", 8), ("current_l3clk", "H", 2)]  # fmt: skip
_V2_1 = [*_V2_TEMPS, ("average_gfx_activity", "H", 1), ("average_mm_activity", "H", 1),
         # 4 (header) + 24 + 4 = 32: already 8-aligned for the u64
         ("system_clock_counter", "Q", 1), *_V2_POWER, *_V2_CLOCKS, ("throttle_status", "I", 1),
         ("fan_pwm", "H", 1), ("padding", "H", 3)]  # fmt: skip
_AVG_TEMPS = [("average_temperature_gfx", "H", 1), ("average_temperature_soc", "H", 1),
              ("average_temperature_core", "H", 8), ("average_temperature_l3", "H", 2)]  # fmt: skip
FIELDS = {
    (2, 0): [("pad", "x", 4), ("system_clock_counter", "Q", 1), *_V2_TEMPS, ("average_gfx_activity", "H", 1),
             ("average_mm_activity", "H", 1), *_V2_POWER, *_V2_CLOCKS, ("throttle_status", "I", 1),
             ("fan_pwm", "H", 1), ("padding", "H", 1)],
    (2, 1): _V2_1,
    (2, 2): [*_V2_1, ("indep_throttle_status", "Q", 1)],
    (2, 3): [*_V2_1, ("indep_throttle_status", "Q", 1), *_AVG_TEMPS],
    # 152 + 12 = 164 bytes of fields, padded to the struct's 8-byte alignment
    (2, 4): [*_V2_1, ("indep_throttle_status", "Q", 1), *_AVG_TEMPS, ("average_cpu_voltage", "H", 1),
             ("average_soc_voltage", "H", 1), ("average_gfx_voltage", "H", 1),
             ("average_cpu_current", "H", 1),
             ("average_soc_current", "H", 1), ("average_gfx_current", "H", 1), ("tail", "x", 4)],
    (3, 0): [("temperature_gfx", "H", 1), ("temperature_soc", "H", 1), ("temperature_core", "H", 16),
             ("temperature_skin", "H", 1), ("average_gfx_activity", "H", 1), ("average_vcn_activity", "H", 1),
             ("average_ipu_activity", "H", 8), ("average_core_c0_activity", "H", 16),
             ("average_dram_reads", "H", 1), ("average_dram_writes", "H", 1), ("average_ipu_reads", "H", 1),
             ("average_ipu_writes", "H", 1), ("pad", "x", 2),  # 102 -> 104 for the u64
             ("system_clock_counter", "Q", 1), ("average_socket_power", "I", 1),
             ("average_ipu_power", "H", 1),
             ("pad", "x", 2),  # 118 -> 120 for the u32
             ("average_apu_power", "I", 1), ("average_gfx_power", "I", 1), ("average_dgpu_power", "I", 1),
             ("average_all_core_power", "I", 1), ("average_core_power", "H", 16),
             ("average_sys_power", "H", 1),
             ("stapm_power_limit", "H", 1), ("current_stapm_power_limit", "H", 1),
             ("average_gfxclk_frequency", "H", 1), ("average_socclk_frequency", "H", 1),
             ("average_vpeclk_frequency", "H", 1), ("average_ipuclk_frequency", "H", 1),
             ("average_fclk_frequency", "H", 1), ("average_vclk_frequency", "H", 1),
             ("average_uclk_frequency", "H", 1), ("average_mpipu_frequency", "H", 1),
             ("current_coreclk", "H", 16), ("current_core_maxfreq", "H", 1), ("current_gfx_maxfreq", "H", 1),
             ("pad", "x", 2),  # 226 -> 228 for the u32s
             ("throttle_residency_prochot", "I", 1), ("throttle_residency_spl", "I", 1),
             ("throttle_residency_fppt", "I", 1), ("throttle_residency_sppt", "I", 1),
             ("throttle_residency_thm_core", "I", 1), ("throttle_residency_thm_gfx", "I", 1),
             ("throttle_residency_thm_soc", "I", 1), ("time_filter_alphavalue", "I", 1),
             ("tail", "x", 4)],  # 260 -> 264: the struct's 8-byte alignment
}  # fmt: skip
# sizeof(struct gpu_metrics_vX_Y) on x86-64, worked out by hand from the header
SIZES = {(2, 0): 120, (2, 1): 120, (2, 2): 128, (2, 3): 152, (2, 4): 168, (3, 0): 264}


def blob(rev: tuple[int, int] = (2, 2), structure_size: int | None = None, **values: int) -> bytes:
    """A gpu_metrics table of revision ``rev`` with the given raw field values (first element of an array)."""
    fmt, args = "<HBB", []
    size = structure_size if structure_size is not None else SIZES.get(rev, 128)
    args += [size, rev[0], rev[1]]
    for name, code, count in FIELDS.get(rev, []):
        if code == "x":
            fmt += f"{count}x"
            continue
        fmt += f"{count}{code}"
        full = {"H": 0xFFFF, "I": 0xFFFFFFFF, "Q": 0}[code]
        args += [values.get(name, full)] + [full] * (count - 1)
    return struct.pack(fmt, *args)


def renoir(clock_mhz: int = 1800, temperature_c: float = 61.5, power_w: float = 14.2, rev=(2, 2)) -> bytes:
    """A Renoir-like table (gfx90c): clocks in MHz, temperature in centi-degrees, power in mW."""
    power = {"average_socket_power": round(power_w * 1000)}
    return blob(
        rev,
        average_gfxclk_frequency=clock_mhz,
        current_gfxclk=clock_mhz,
        temperature_gfx=round(temperature_c * 100),
        **power,
    )
