"""A fake machine for the tester's preflight: a file-system root with KFD topology, amdgpu sysfs, /proc and
captured command outputs (tests/data/fleet), read through oto.fleet.device.read_facts(root, runner)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "fleet"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_root(
    tmp: Path,
    *,
    kfd: bool = True,
    rocminfo: bool = True,
    dmidecode: str | None = "dmidecode_ddr4_4gb_32gb.txt",
    vram_bytes: int = 2 << 30,
    on_ac: bool = True,
    power_profile: str | None = "Balanced",
    display_manager: str | None = "inactive",
    machine_id: str = "0123456789abcdef0123456789abcdef",
) -> Path:
    """An Acer Aspire 5 with a Ryzen 7 5700U (gfx90c, 8 CUs at 1900 MHz), 4 + 32 GB DDR4-3200, a 2 GiB
    carve-out, run from a TTY on Pop!_OS, unless told otherwise."""
    root = tmp / "machine"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    if kfd:
        write(nodes / "0" / "properties", (DATA / "kfd_node_cpu.txt").read_text())
        node = (
            (DATA / "kfd_node_gfx90c_8cu.txt")
            .read_text()
            .replace("local_mem_size 536870912", f"local_mem_size {vram_bytes}")
        )
        write(nodes / "1" / "properties", node)
    dev = root / "sys/class/drm/card1/device"
    write(dev / "vendor", "0x1002\n")
    write(dev / "device", "0x1638\n")
    write(dev / "mem_info_vram_total", f"{vram_bytes}\n")
    write(dev / "mem_info_gtt_total", f"{16 << 30}\n")
    write(dev / "pp_dpm_sclk", (DATA / "pp_dpm_sclk_1900.txt").read_text())
    write(dev / "power_dpm_force_performance_level", "auto\n")
    write(root / "sys/class/drm/card1-eDP-1/status", "connected\n")
    write(root / "sys/class/power_supply/ACAD/type", "Mains\n")
    write(root / "sys/class/power_supply/ACAD/online", "1\n" if on_ac else "0\n")
    write(root / "sys/class/power_supply/BAT1/type", "Battery\n")
    write(root / "proc/cpuinfo", "processor\t: 0\nmodel name\t: AMD Ryzen 7 5700U with Radeon Graphics\n")
    write(root / "proc/sys/kernel/osrelease", "6.9.3-76060903-generic\n")
    write(root / "opt/rocm/.info/version", "6.1.2-119\n")
    write(root / "etc/machine-id", machine_id + "\n")
    captured = root / "captured"
    if rocminfo:
        write(captured / "rocminfo.txt", (DATA / "rocminfo_gfx90c_8cu.txt").read_text())
    if dmidecode:
        write(captured / "dmidecode_-t_17.txt", (DATA / dmidecode).read_text())
    if power_profile:
        write(captured / "system76-power_profile.txt", f"Power Profile: {power_profile}\n")
    if display_manager:
        write(captured / "systemctl_is-active_display-manager.txt", display_manager + "\n")
    return root


def runner(root: Path):
    from oto.fleet.tester import captured_runner

    return captured_runner(root)
