# A model of the Vivado commands the generated build_vivado.tcl uses, for plain tclsh.
#
# It knows the pin, interface, address-space and address-segment names of the IPs the script
# instantiates (processing_system7, zynq_ultra_ps_e, smartconnect, proc_sys_reset) and of the
# module reference vta_top (described by the test from the generated Verilog, in ::vta_ref).
# Like Vivado it fails on: a get_bd_* pattern that matches nothing, an unknown CONFIG property,
# a pin connected twice or a net with two drivers, a segment not reachable from the address
# space it is assigned in or outside that space, overlapping segments, and at
# validate_bd_design: an unconnected required pin or interface, a clock pin with a FREQ_HZ that
# differs from the frequency its source really makes, an unmapped master.
# The flow steps after the block design (synthesis, implementation) only create the files the
# script copies. The model writes what it built (cells, clocks, address map) to
# $::env(VTA_TCL_MODEL_REPORT).

proc model_error {msg} { return -code error "model: $msg" }

# ------------------------------------------------------------------ IP definitions
# Each IP kind has: defaults (CONFIG.* it accepts with their default), pins (name dir kind
# required clock-frequency), interfaces (name mode memory-map), spaces, segments.

set ::ip_defaults(processing_system7) {
    PCW_FPGA0_PERIPHERAL_FREQMHZ 50 PCW_USE_M_AXI_GP0 1 PCW_USE_M_AXI_GP1 0
    PCW_USE_S_AXI_HP0 0 PCW_USE_S_AXI_HP1 0 PCW_USE_S_AXI_ACP 0 PCW_S_AXI_HP0_DATA_WIDTH 64
    PCW_USE_FABRIC_INTERRUPT 0 PCW_IRQ_F2P_INTR 0 PCW_EN_CLK0_PORT 1 PCW_EN_RST0_PORT 1
}
set ::ip_defaults(zynq_ultra_ps_e) {
    PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ 100 PSU__FPGA_PL0_ENABLE 1
    PSU__USE__M_AXI_GP0 1 PSU__USE__M_AXI_GP1 1 PSU__USE__M_AXI_GP2 1
    PSU__MAXIGP0__DATA_WIDTH 128 PSU__MAXIGP1__DATA_WIDTH 128 PSU__MAXIGP2__DATA_WIDTH 32
    PSU__USE__S_AXI_GP0 0 PSU__USE__S_AXI_GP2 0 PSU__SAXIGP2__DATA_WIDTH 128
    PSU__SAXIGP0__DATA_WIDTH 128 PSU__USE__IRQ0 0
}
set ::ip_defaults(smartconnect) {NUM_SI 1 NUM_MI 2 NUM_CLKS 1 HAS_ARESETN 1}
set ::ip_defaults(proc_sys_reset) {
    C_EXT_RST_WIDTH 4 C_AUX_RST_WIDTH 4 C_EXT_RESET_HIGH 0 C_AUX_RESET_HIGH 0
    C_NUM_BUS_RST 1 C_NUM_PERP_RST 1 C_NUM_INTERCONNECT_ARESETN 1 C_NUM_PERP_ARESETN 1
}
set ::allowed_values {
    PCW_S_AXI_HP0_DATA_WIDTH {32 64} PSU__SAXIGP2__DATA_WIDTH {32 64 128}
    PSU__MAXIGP0__DATA_WIDTH {32 64 128}
}

proc cfg {cell key} { dict get $::cells($cell) config $key }

# The frequency (MHz) a PS really makes for a requested PL clock: an integer divider of its IO
# PLL (1000 MHz on the Zynq-7000, 1500 MHz on the Zynq UltraScale+), never above the request.
proc ps_clock {pll req} {
    set div [expr {int(ceil($pll / double($req) - 1e-9))}]
    return [expr {$pll / double($div)}]
}

# pins: name -> {dir kind required freq}
proc ip_pins {cell} {
    set c $::cells($cell)
    set p {}
    switch [dict get $c kind] {
        processing_system7 {
            dict set p FCLK_CLK0 [list out clk 0 [ps_clock 1000 [cfg $cell PCW_FPGA0_PERIPHERAL_FREQMHZ]]]
            dict set p FCLK_RESET0_N {out rst 0 {}}
            if {[cfg $cell PCW_USE_M_AXI_GP0]} { dict set p M_AXI_GP0_ACLK {in clk 1 {}} }
            if {[cfg $cell PCW_USE_M_AXI_GP1]} { dict set p M_AXI_GP1_ACLK {in clk 1 {}} }
            if {[cfg $cell PCW_USE_S_AXI_HP0]} { dict set p S_AXI_HP0_ACLK {in clk 1 {}} }
            if {[cfg $cell PCW_USE_S_AXI_HP1]} { dict set p S_AXI_HP1_ACLK {in clk 1 {}} }
            if {[cfg $cell PCW_USE_S_AXI_ACP]} { dict set p S_AXI_ACP_ACLK {in clk 1 {}} }
            if {[cfg $cell PCW_USE_FABRIC_INTERRUPT] && [cfg $cell PCW_IRQ_F2P_INTR]} {
                dict set p IRQ_F2P {in intr 0 {}}
            }
        }
        zynq_ultra_ps_e {
            dict set p pl_clk0 [list out clk 0 [ps_clock 1500 [cfg $cell PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ]]]
            dict set p pl_resetn0 {out rst 0 {}}
            foreach {use pin} {PSU__USE__M_AXI_GP0 maxihpm0_fpd_aclk PSU__USE__M_AXI_GP1
                               maxihpm1_fpd_aclk PSU__USE__M_AXI_GP2 maxihpm0_lpd_aclk
                               PSU__USE__S_AXI_GP0 saxihpc0_fpd_aclk
                               PSU__USE__S_AXI_GP2 saxihp0_fpd_aclk} {
                if {[cfg $cell $use]} { dict set p $pin {in clk 1 {}} }
            }
            if {[cfg $cell PSU__USE__IRQ0]} { dict set p pl_ps_irq0 {in intr 0 {}} }
        }
        smartconnect {
            dict set p aclk {in clk 1 {}}
            if {[cfg $cell HAS_ARESETN]} { dict set p aresetn {in rst 1 {}} }
        }
        proc_sys_reset {
            dict set p slowest_sync_clk {in clk 1 {}}
            dict set p ext_reset_in {in rst 1 {}}
            foreach n {aux_reset_in mb_debug_sys_rst dcm_locked} { dict set p $n {in data 0 {}} }
            foreach n {mb_reset bus_struct_reset peripheral_reset interconnect_aresetn
                       peripheral_aresetn} { dict set p $n {out rst 0 {}} }
        }
        module {
            dict for {n d} [dict get $::vta_ref pins] {
                dict set p $n [list [dict get $d dir] [dict get $d kind] \
                    [expr {[dict get $d dir] eq "in"}] {}]
            }
        }
    }
    return $p
}

# interfaces: name -> {mode memmap required}
proc ip_intf {cell} {
    set c $::cells($cell)
    set i {}
    switch [dict get $c kind] {
        processing_system7 {
            if {[cfg $cell PCW_USE_M_AXI_GP0]} { dict set i M_AXI_GP0 {master {} 0} }
            if {[cfg $cell PCW_USE_M_AXI_GP1]} { dict set i M_AXI_GP1 {master {} 0} }
            foreach n {HP0 HP1 ACP} {
                if {[cfg $cell PCW_USE_S_AXI_$n]} { dict set i S_AXI_$n [list slave S_AXI_$n 0] }
            }
            dict set i DDR {external {} 0}
            dict set i FIXED_IO {external {} 0}
        }
        zynq_ultra_ps_e {
            foreach {use n} {PSU__USE__M_AXI_GP0 M_AXI_HPM0_FPD PSU__USE__M_AXI_GP1 M_AXI_HPM1_FPD
                             PSU__USE__M_AXI_GP2 M_AXI_HPM0_LPD} {
                if {[cfg $cell $use]} { dict set i $n {master {} 0} }
            }
            # the slave ports are named by interface, their memory maps by port number
            if {[cfg $cell PSU__USE__S_AXI_GP0]} { dict set i S_AXI_HPC0_FPD {slave SAXIGP0 0} }
            if {[cfg $cell PSU__USE__S_AXI_GP2]} { dict set i S_AXI_HP0_FPD {slave SAXIGP2 0} }
        }
        smartconnect {
            for {set k 0} {$k < [cfg $cell NUM_SI]} {incr k} {
                dict set i [format S%02d_AXI $k] {slave {} 1}
            }
            for {set k 0} {$k < [cfg $cell NUM_MI]} {incr k} {
                dict set i [format M%02d_AXI $k] {master {} 1}
            }
        }
        proc_sys_reset {}
        module {
            dict for {n d} [dict get $::vta_ref intf] {
                dict set i $n [list [dict get $d mode] $n 1]
            }
        }
    }
    return $i
}

# master address spaces: name -> {range {intf {base size ...} ...}}
proc ip_spaces {cell} {
    set c $::cells($cell)
    switch [dict get $c kind] {
        processing_system7 {
            return [dict create Data [list 0x100000000 \
                {M_AXI_GP0 {0x40000000 0x40000000} M_AXI_GP1 {0x80000000 0x40000000}}]]
        }
        zynq_ultra_ps_e {
            return [dict create Data [list 0x10000000000 \
                {M_AXI_HPM0_FPD {0xA0000000 0x10000000 0x400000000 0x100000000}
                 M_AXI_HPM1_FPD {0xB0000000 0x10000000 0x500000000 0x100000000}
                 M_AXI_HPM0_LPD {0x80000000 0x20000000}}]]
        }
        module {
            set s {}
            dict for {n d} [dict get $::vta_ref intf] {
                if {[dict get $d mode] eq "master"} {
                    set size [expr {1 << [dict get $d addr_width]}]
                    dict set s $n [list $size [list $n [list 0 $size]]]
                }
            }
            return $s
        }
    }
    return {}
}

# slave segments: list of {path intf offset range} (offset {} = assigned by the user)
proc ip_segs {cell} {
    set c $::cells($cell)
    set intf [ip_intf $cell]
    set out {}
    switch [dict get $c kind] {
        processing_system7 {
            if {[dict exists $intf S_AXI_HP0]} {
                lappend out [list S_AXI_HP0/HP0_DDR_LOWOCM S_AXI_HP0 0x0 0x20000000]
                lappend out [list S_AXI_HP0/HP0_HIGH_OCM S_AXI_HP0 0xFFFC0000 0x40000]
            }
        }
        zynq_ultra_ps_e {
            foreach {n mm p} {S_AXI_HP0_FPD SAXIGP2 HP0 S_AXI_HPC0_FPD SAXIGP0 HPC0} {
                if {![dict exists $intf $n]} continue
                lappend out [list $mm/${p}_DDR_LOW $n 0x0 0x80000000]
                lappend out [list $mm/${p}_DDR_HIGH $n 0x800000000 0x800000000]
                lappend out [list $mm/${p}_QSPI $n 0xC0000000 0x20000000]
                lappend out [list $mm/${p}_PCIE_LOW $n 0xE0000000 0x10000000]
                lappend out [list $mm/${p}_LPS_OCM $n 0xFF000000 0x1000000]
            }
        }
        module {
            dict for {n d} [dict get $::vta_ref intf] {
                if {[dict get $d mode] eq "slave"} {
                    lappend out [list $n/reg0 $n {} [expr {1 << [dict get $d addr_width]}]]
                }
            }
        }
    }
    return $out
}

# ------------------------------------------------------------------ project-level commands
array unset ::cells
set ::model_proj {}
set ::files {}
set ::board_parts {}
set ::net_of [dict create]
set ::nets [dict create]
set ::intf_peer [dict create]
set ::assigned [dict create]
set ::validated 0
set ::run_state [dict create]

proc create_project {name dir args} {
    set ::model_proj [list $name $dir]
    file mkdir $dir
    return $name
}
proc current_project {} { return [lindex $::model_proj 0] }
proc get_board_parts {args} { return $::board_parts }
proc add_files {args} {
    foreach f [lindex $args end] {
        if {![file exists $f]} { model_error "add_files: $f does not exist" }
        lappend ::files $f
    }
    return [lindex $args end]
}
proc get_files {pattern} {
    set hits {}
    foreach f $::files {
        if {[string match $pattern [file tail $f]] || [string match $pattern $f]} {
            lappend hits $f
        }
    }
    if {$pattern eq "vta_bd.bd"} { return vta_bd.bd }
    if {![llength $hits]} { model_error "get_files $pattern matches nothing" }
    return $hits
}
proc update_compile_order {args} {}
proc current_fileset {} { return sources_1 }
proc create_bd_design {name} { set ::bd $name }
proc save_bd_design {} {
    if {!$::validated} { model_error "save_bd_design before validate_bd_design" }
}

proc set_property {args} {
    if {[lindex $args 0] eq "-dict"} {
        set pairs [lindex $args 1]
        set objs [lindex $args 2]
    } else {
        set pairs [lrange $args 0 1]
        set objs [lindex $args 2]
    }
    foreach obj $objs {
        foreach {k v} $pairs { set_one $obj $k $v }
    }
}
proc set_one {obj key value} {
    if {[info exists ::cells($obj)]} {
        if {![string match CONFIG.* $key]} { model_error "cell $obj has no property $key" }
        set k [string range $key 7 end]
        set kind [dict get $::cells($obj) kind]
        if {$kind eq "module" || ![dict exists $::ip_defaults($kind) $k]} {
            model_error "$kind ($obj) has no property CONFIG.$k"
        }
        if {[dict exists $::allowed_values $k] && $value ni [dict get $::allowed_values $k]} {
            model_error "CONFIG.$k of $obj cannot be $value (allowed: [dict get $::allowed_values $k])"
        }
        dict set ::cells($obj) config $k $value
        return
    }
    switch -- $key {
        board_part - file_type - top { return }
    }
    model_error "set_property $key on $obj: not modelled"
}

# ------------------------------------------------------------------ block design objects
proc create_bd_cell {args} {
    array set o {-type {} -vlnv {} -reference {}}
    set name [lindex $args end]
    foreach {k v} [lrange $args 0 end-1] { set o($k) $v }
    if {[info exists ::cells($name)]} { model_error "cell $name exists" }
    if {$o(-type) eq "module"} {
        if {$o(-reference) ne [dict get $::vta_ref module]} {
            model_error "no module $o(-reference) among the added sources"
        }
        set ::cells($name) [dict create kind module config {}]
    } else {
        set parts [split $o(-vlnv) :]
        set kind [lindex $parts 2]
        if {[lindex $parts 0] ne "xilinx.com" || ![info exists ::ip_defaults($kind)]} {
            model_error "unknown IP $o(-vlnv)"
        }
        set ::cells($name) [dict create kind $kind config $::ip_defaults($kind)]
    }
    return $name
}

proc apply_bd_automation {args} {
    array set o [lrange $args 0 end-1]
    set cell [lindex $args end]
    set rule $o(-rule)
    set kind [dict get $::cells($cell) kind]
    if {$rule ne "xilinx.com:bd_rule:$kind"} { model_error "automation rule $rule for $kind" }
}

proc split_name {n} {
    set n [string trimleft $n /]
    set i [string first / $n]
    return [list [string range $n 0 [expr {$i - 1}]] [string range $n [expr {$i + 1}] end]]
}

proc find_objects {what pattern quiet} {
    set hits {}
    foreach cell [array names ::cells] {
        switch $what {
            pin { set names [dict keys [ip_pins $cell]] }
            intf { set names [dict keys [ip_intf $cell]] }
            space { set names [dict keys [ip_spaces $cell]] }
            seg { set names {}; foreach s [ip_segs $cell] { lappend names [lindex $s 0] } }
        }
        foreach n $names {
            if {[string match [string trimleft $pattern /] $cell/$n]} { lappend hits $cell/$n }
        }
    }
    set cmd [dict get {pin get_bd_pins intf get_bd_intf_pins space get_bd_addr_spaces
                       seg get_bd_addr_segs} $what]
    if {![llength $hits] && !$quiet} { model_error "$cmd $pattern matches nothing" }
    return [lsort $hits]
}
proc get_objs {what args} {
    set quiet [expr {[lsearch $args -quiet] >= 0}]
    set pats [lsearch -all -inline -not $args -*]
    set out {}
    foreach p $pats { lappend out {*}[find_objects $what $p $quiet] }
    return $out
}
proc get_bd_pins {args} { get_objs pin {*}$args }
proc get_bd_intf_pins {args} { get_objs intf {*}$args }
proc get_bd_addr_spaces {args} { get_objs space {*}$args }
proc get_bd_addr_segs {args} { get_objs seg {*}$args }

proc pin_info {pin} {
    lassign [split_name $pin] cell name
    return [dict get [ip_pins $cell] $name]
}

proc connect_bd_net {args} {
    set pins [lsearch -all -inline -not $args -*]
    if {[llength $pins] < 2} { model_error "connect_bd_net needs two pins, got {$pins}" }
    set drivers {}
    foreach p $pins {
        lassign [split_name $p] cell name
        if {![dict exists [ip_pins $cell] $name]} { model_error "no pin $p" }
        if {[dict exists $::net_of $p]} { model_error "pin $p is already connected" }
        if {[lindex [pin_info $p] 0] eq "out"} { lappend drivers $p }
    }
    if {[llength $drivers] != 1} { model_error "net {$pins} has drivers {$drivers}" }
    set id [dict size $::nets]
    dict set ::nets $id [list $drivers $pins]
    foreach p $pins { dict set ::net_of $p $id }
}

proc connect_bd_intf_net {a b} {
    foreach p [list $a $b] {
        lassign [split_name $p] cell name
        if {![dict exists [ip_intf $cell] $name]} { model_error "no interface pin $p" }
        if {[dict exists $::intf_peer $p]} { model_error "interface $p is already connected" }
    }
    set ma [lindex [intf_info $a] 0]
    set mb [lindex [intf_info $b] 0]
    if {[lsort [list $ma $mb]] ne {master slave}} {
        model_error "connect_bd_intf_net $a ($ma) $b ($mb): needs one master and one slave"
    }
    dict set ::intf_peer $a $b
    dict set ::intf_peer $b $a
}
proc intf_info {p} {
    lassign [split_name $p] cell name
    return [dict get [ip_intf $cell] $name]
}

# The slave interfaces reached from master interface pin `m` (through SmartConnects).
proc reach {m} {
    if {![dict exists $::intf_peer $m]} { return {} }
    set s [dict get $::intf_peer $m]
    lassign [split_name $s] cell name
    if {[dict get $::cells($cell) kind] eq "smartconnect"} {
        set out {}
        dict for {n d} [ip_intf $cell] {
            if {[lindex $d 0] eq "master"} { lappend out {*}[reach $cell/$n] }
        }
        return $out
    }
    return [list $s]
}

proc seg_record {path} {
    lassign [split_name $path] cell name
    foreach s [ip_segs $cell] { if {[lindex $s 0] eq $name} { return [list $cell {*}$s] } }
    model_error "no segment $path"
}

proc assign_bd_address {args} {
    set o(-offset) {}
    set o(-range) {}
    set segs {}
    for {set k 0} {$k < [llength $args]} {incr k} {
        set a [lindex $args $k]
        switch -- $a {
            -offset - -range - -target_address_space { set o($a) [lindex $args [incr k]] }
            -force {}
            default { lappend segs {*}$a }
        }
    }
    if {![llength $segs]} { model_error "assign_bd_address without segments" }
    set space $o(-target_address_space)
    lassign [split_name $space] mcell sname
    lassign [dict get [ip_spaces $mcell] $sname] srange apertures
    foreach seg $segs {
        lassign [seg_record $seg] scell path sintf fixed range
        set slave_pin $scell/$sintf
        set via {}
        dict for {mi ap} $apertures {
            if {[lsearch -exact [reach $mcell/$mi] $slave_pin] >= 0} { set via $mi }
        }
        if {$via eq ""} { model_error "segment $seg is not reachable from address space $space" }
        if {$fixed ne ""} {
            set offset $fixed
            if {$o(-offset) ne "" && $o(-offset) != $fixed} {
                model_error "segment $seg is fixed at $fixed, not $o(-offset)"
            }
        } else {
            if {$o(-offset) eq ""} { model_error "segment $seg needs -offset" }
            set offset $o(-offset)
            if {$o(-range) ne ""} { set range [range_bytes $o(-range)] }
        }
        set inside 0
        foreach {base size} [dict get $apertures $via] {
            if {$offset >= $base && $offset + $range <= $base + $size} { set inside 1 }
        }
        if {!$inside} {
            model_error [format "segment %s at 0x%X (+0x%X) is outside the apertures of %s via %s" \
                $seg $offset $range $space $via]
        }
        dict for {other rec} [dict_get_default $::assigned $space {}] {
            lassign $rec ob or
            if {$offset < $ob + $or && $ob < $offset + $range} {
                model_error [format "segment %s at 0x%X overlaps %s at 0x%X in %s" \
                    $seg $offset $other $ob $space]
            }
        }
        dict set ::assigned $space $seg [list $offset $range]
    }
}
proc dict_get_default {d k def} { if {[dict exists $d $k]} { dict get $d $k } else { set def } }
proc range_bytes {r} {
    if {[regexp {^(\d+)([KMG])$} $r -> n u]} {
        return [expr {$n * [dict get {K 1024 M 1048576 G 1073741824} $u]}]
    }
    return [expr {$r}]
}

# ------------------------------------------------------------------ validation
proc net_freq {pin} {
    if {![dict exists $::net_of $pin]} { return {} }
    set drv [lindex [dict get $::nets [dict get $::net_of $pin]] 0 0]
    return [lindex [pin_info $drv] 3]
}

proc validate_bd_design {args} {
    foreach cell [array names ::cells] {
        dict for {n d} [ip_pins $cell] {
            lassign $d dir kind req
            if {$req && ![dict exists $::net_of $cell/$n]} {
                model_error "validate: required pin $cell/$n is not connected"
            }
        }
        dict for {n d} [ip_intf $cell] {
            if {[lindex $d 2] && ![dict exists $::intf_peer $cell/$n]} {
                model_error "validate: interface $cell/$n is not connected"
            }
        }
        if {[dict get $::cells($cell) kind] eq "module"} { check_module_clocks $cell }
    }
    # every master space of the module reference that reaches a slave has a segment assigned,
    # every module slave segment is mapped in some space
    foreach cell [array names ::cells] {
        if {[dict get $::cells($cell) kind] ne "module"} continue
        dict for {s d} [ip_spaces $cell] {
            if {![dict size [dict_get_default $::assigned $cell/$s {}]]} {
                model_error "validate: address space $cell/$s has no segment mapped"
            }
        }
        foreach seg [ip_segs $cell] {
            set found 0
            dict for {sp m} $::assigned { if {[dict exists $m $cell/[lindex $seg 0]]} { set found 1 } }
            if {!$found} { model_error "validate: slave segment $cell/[lindex $seg 0] is not mapped" }
        }
    }
    set ::validated 1
}

proc check_module_clocks {cell} {
    set clk [dict get $::vta_ref clock]
    set real [net_freq $cell/$clk]
    if {$real eq ""} { model_error "validate: $cell/$clk has no clock source" }
    foreach {obj hz} [dict get $::vta_ref freq_hz] {
        if {abs($hz - $real * 1e6) > 1} {
            model_error [format "validate: FREQ_HZ %s of %s/%s does not match the %.3f MHz of its clock source" \
                $hz $cell $obj $real]
        }
    }
}

# ------------------------------------------------------------------ the implementation flow
proc make_wrapper {args} {
    set dir [lindex $::model_proj 1]
    set f $dir/vta_bd_wrapper.v
    set fh [open $f w]; puts $fh "// model"; close $fh
    write_report
    return $f
}
proc launch_runs {args} {}
proc get_runs {name} { return $name }
proc wait_on_run {run} {
    lassign $::model_proj name dir
    if {$run eq "impl_1"} {
        file mkdir $dir/$name.runs/impl_1 $dir/$name.gen/sources_1/bd/vta_bd/hw_handoff
        close [open $dir/$name.runs/impl_1/vta_bd_wrapper.bit w]
        close [open $dir/$name.gen/sources_1/bd/vta_bd/hw_handoff/vta_bd.hwh w]
    }
}
proc get_property {prop obj} {
    if {$prop eq "PROGRESS"} { return "100%" }
    model_error "get_property $prop: not modelled"
}
proc open_run {run} {}
proc report_utilization {args} { close [open [lindex $args end] w] }
proc report_timing_summary {args} { close [open [lindex $args end] w] }

proc write_report {} {
    set fh [open $::env(VTA_TCL_MODEL_REPORT) w]
    foreach cell [lsort [array names ::cells]] {
        puts $fh [list cell $cell [dict get $::cells($cell) kind]]
    }
    foreach cell [lsort [array names ::cells]] {
        dict for {n d} [ip_pins $cell] {
            if {[lindex $d 1] eq "clk" && [lindex $d 0] eq "in"} {
                puts $fh [list clock $cell/$n [net_freq $cell/$n]]
            }
        }
    }
    dict for {space m} $::assigned {
        dict for {seg rec} $m { puts $fh [list seg $space $seg {*}$rec] }
    }
    foreach {id net} $::nets {
        if {[lsearch -glob [lindex $net 1] */interrupt] >= 0} { puts $fh [list irq {*}[lindex $net 1]] }
    }
    close $fh
}
