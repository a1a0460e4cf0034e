# A model of the Platform Designer commands of the generated vta_hw.tcl (component) and
# vta_qsys.tcl (qsys-script), for plain tclsh.
#
# The component's ports are checked against the VTA top's real ports (::vta_ports, read by the
# test from the generated Verilog: name -> {Input|Output width}). load_system gives the parts of
# the DE10-Nano GHRD the script touches: the HPS (hps_0, interfaces appearing with its
# parameters), the 50 MHz clock source (clk_0), and the GHRD's peripherals on the lightweight
# bridge with their interrupt lines (sysid 0x1000, JTAG UART 0x2000 irq 2, LED/switch/button
# PIOs 0x3000-0x500F irqs 0 and 1). Like Platform Designer it fails on: an unknown parameter or
# interface, a port that the Verilog does not have (or with another direction or width), a
# connection between incompatible interfaces, and at save_system: an unconnected clock or reset
# sink, overlapping or misaligned slave windows, a window beyond the master's reach, two
# interrupt senders on one line. The result is written to $::env(VTA_TCL_MODEL_REPORT).

package provide qsys 16.1

proc model_error {msg} { return -code error "model: $msg" }

# ------------------------------------------------------------------ the component (_hw.tcl)
set ::comp [dict create interfaces {} ports {} props {}]
set ::roles {
    clock {clk} reset {reset reset_n} interrupt {irq}
    axi4lite {awaddr awvalid awready awprot wdata wstrb wvalid wready bresp bvalid bready
              araddr arvalid arready arprot rdata rresp rvalid rready}
    axi4 {awid awaddr awlen awsize awburst awlock awcache awprot awqos awuser awvalid awready
          wdata wstrb wlast wvalid wready bid bresp bvalid bready
          arid araddr arlen arsize arburst arlock arcache arprot arqos aruser arvalid arready
          rid rdata rresp rlast rvalid rready}
}
set ::required_roles {
    axi4lite {awaddr awvalid awready wdata wstrb wvalid wready bresp bvalid bready araddr
              arvalid arready rdata rresp rvalid rready}
    axi4 {awaddr awlen awsize awburst awvalid awready wdata wstrb wlast wvalid wready bresp
          bvalid bready araddr arlen arsize arburst arvalid arready rdata rresp rlast rvalid
          rready}
    clock {clk} reset {reset_n} interrupt {irq}
}
set ::interface_props {associatedClock associatedReset synchronousEdges
    maximumOutstandingReads maximumOutstandingWrites associatedAddressablePoint}

proc set_module_property {k v} { dict set ::comp props $k $v }
proc add_fileset {args} {}
proc set_fileset_property {args} {}
proc add_fileset_file {name kind how path args} {
    if {![file exists $path]} { model_error "add_fileset_file: $path does not exist" }
}
proc add_interface {name type dir} {
    if {![dict exists $::roles $type]} { model_error "unknown interface type $type" }
    dict set ::comp interfaces $name [dict create type $type dir $dir props {} roles {}]
}
proc set_interface_property {name prop value} {
    if {![dict exists $::comp interfaces $name]} { model_error "no interface $name" }
    if {$prop ni $::interface_props} { model_error "interface property $prop is unknown" }
    dict set ::comp interfaces $name props $prop $value
}
proc add_interface_port {iface port role dir width} {
    if {![dict exists $::comp interfaces $iface]} { model_error "no interface $iface" }
    set type [dict get $::comp interfaces $iface type]
    if {$role ni [dict get $::roles $type]} { model_error "$type interface has no role $role" }
    if {![dict exists $::vta_ports $port]} { model_error "port $port is not in vta_top.v" }
    lassign [dict get $::vta_ports $port] vdir vwidth
    if {$vdir ne $dir || $vwidth != $width} {
        model_error "port $port is $dir $width here but $vdir $vwidth in vta_top.v"
    }
    if {[dict exists $::comp ports $port]} { model_error "port $port is added twice" }
    dict set ::comp ports $port [list $iface $role $width]
    dict set ::comp interfaces $iface roles $role $width
}

# After vta_hw.tcl: every port of the top is in an interface, every interface complete.
proc check_component {} {
    dict for {port d} $::vta_ports {
        if {![dict exists $::comp ports $port]} { model_error "port $port is in no interface" }
    }
    dict for {name i} [dict get $::comp interfaces] {
        foreach r [dict get $::required_roles [dict get $i type]] {
            if {![dict exists $i roles $r]} { model_error "interface $name lacks role $r" }
        }
    }
    set ::component_vta [component_interfaces]
}
proc component_interfaces {} {
    set out {}
    dict for {name i} [dict get $::comp interfaces] {
        set type [dict get $i type]
        set dir [dict get $i dir]
        switch $type {
            clock { dict set out $name {clock sink 1} }
            reset { dict set out $name {reset sink 1} }
            interrupt { dict set out $name {irq sender 0} }
            axi4lite - axi4 {
                if {$dir eq "end"} {
                    set span [expr {1 << [dict get $i roles awaddr]}]
                    dict set out $name [list mm slave 0 $span]
                } else {
                    dict set out $name [list mm master 0 [expr {1 << [dict get $i roles awaddr]}] \
                        [dict get $i roles wdata]]
                }
            }
        }
    }
    return $out
}

# ------------------------------------------------------------------ the system (qsys-script)
set ::inst [dict create]
set ::conns [dict create]

set ::hps_defaults {LWH2F_Enable true F2S_Width 0 S2F_Width 0 F2SDRAM_Type {}
    F2SDRAM_Width {} F2SINTERRUPT_Enable true H2F_USER1_CLK_Enable false}
set ::pll_defaults {gui_reference_clock_frequency 50.0 gui_number_of_clocks 1
    gui_output_clock_frequency0 100.0 gui_use_locked true}

proc load_system {file} {
    dict set ::inst clk_0 [dict create type clock_source params {}]
    dict set ::inst hps_0 [dict create type altera_hps params $::hps_defaults]
    foreach {name span} {sysid_qsys 8 jtag_uart 8 led_pio 16 dipsw_pio 16 button_pio 16} {
        dict set ::inst $name [dict create type ghrd_peripheral params [list span $span]]
    }
    # the GHRD's own connections
    add_connection clk_0.clk hps_0.h2f_lw_axi_clock
    foreach {name base} {sysid_qsys 0x1000 jtag_uart 0x2000 led_pio 0x3000 dipsw_pio 0x4000
                         button_pio 0x5000} {
        add_connection clk_0.clk $name.clk
        add_connection hps_0.h2f_reset $name.reset
        add_connection hps_0.h2f_lw_axi_master $name.s1
        set_connection_parameter_value hps_0.h2f_lw_axi_master/$name.s1 baseAddress $base
    }
    foreach {name irq} {dipsw_pio 0 button_pio 1 jtag_uart 2} {
        add_connection hps_0.f2h_irq0 $name.irq
        set_connection_parameter_value hps_0.f2h_irq0/$name.irq irqNumber $irq
    }
}

# interfaces of an instance: name -> {kind role required ?span? ?width?}
proc interfaces {name} {
    set i [dict get $::inst $name]
    set p [dict get $i params]
    switch [dict get $i type] {
        clock_source { return {clk {clock source 0} clk_reset {reset source 0}} }
        ghrd_peripheral {
            return [list clk {clock sink 1} reset {reset sink 1} \
                s1 [list mm slave 0 [dict get $p span]] irq {irq sender 0}]
        }
        altera_pll {
            set out {refclk {clock sink 1} reset {reset sink 1}}
            for {set k 0} {$k < [dict get $p gui_number_of_clocks]} {incr k} {
                dict set out outclk$k {clock source 0}
            }
            if {[dict get $p gui_use_locked]} { dict set out locked {conduit source 0} }
            return $out
        }
        altera_hps {
            set out {h2f_reset {reset source 0}}
            if {[dict get $p LWH2F_Enable]} {
                dict set out h2f_lw_axi_master {mm master 0 0x200000 32}
                dict set out h2f_lw_axi_clock {clock sink 1}
            }
            set w [dict get $p F2S_Width]
            if {$w ni {0 1 2 3}} { model_error "F2S_Width $w (0 off, 1 32-bit, 2 64, 3 128)" }
            if {$w > 0} {
                dict set out f2h_axi_slave [list mm slave 0 0x100000000 [expr {16 << $w}]]
                dict set out f2h_axi_clock {clock sink 1}
            }
            if {[dict get $p F2SDRAM_Type] ne ""} {
                dict set out f2h_sdram0_data [list mm slave 0 0x40000000 [dict get $p F2SDRAM_Width]]
                dict set out f2h_sdram0_clock {clock sink 1}
            }
            if {[dict get $p F2SINTERRUPT_Enable]} { dict set out f2h_irq0 {irq receiver 0} }
            return $out
        }
        vta { return $::component_vta }
    }
}

proc set_instance_parameter_value {name param value} {
    if {![dict exists $::inst $name]} { model_error "no instance $name" }
    if {![dict exists $::inst $name params $param]} {
        model_error "[dict get $::inst $name type] ($name) has no parameter $param"
    }
    dict set ::inst $name params $param $value
}

proc add_instance {name type args} {
    if {[dict exists $::inst $name]} { model_error "instance $name exists" }
    switch $type {
        altera_pll { set params $::pll_defaults }
        vta {
            if {![info exists ::component_vta]} { model_error "no component vta is loaded" }
            set params {}
        }
        default { model_error "unknown component type $type" }
    }
    dict set ::inst $name [dict create type $type params $params]
}

proc iface {ref} {
    lassign [split $ref .] name port
    if {![dict exists $::inst $name]} { model_error "no instance $name" }
    set all [interfaces $name]
    if {![dict exists $all $port]} { model_error "$name has no interface $port" }
    return [dict get $all $port]
}

proc add_connection {a b args} {
    set ia [iface $a]
    set ib [iface $b]
    set ka [lindex $ia 0]
    set kb [lindex $ib 0]
    set pair "[lindex $ia 1]>[lindex $ib 1]"
    set ok [expr {$ka eq $kb && $pair in {source>sink master>slave receiver>sender}}]
    if {!$ok} { model_error "add_connection $a ($ka [lindex $ia 1]) $b ($kb [lindex $ib 1])" }
    if {$ka in {clock reset}} {
        dict for {c p} $::conns { if {[lindex [split $c /] 1] eq $b} {
            model_error "$b is already driven"
        } }
    }
    dict set ::conns $a/$b {}
}

proc set_connection_parameter_value {conn param value} {
    if {![dict exists $::conns $conn]} { model_error "no connection $conn" }
    if {$param ni {baseAddress irqNumber arbitrationPriority defaultConnection}} {
        model_error "connection parameter $param is unknown"
    }
    dict set ::conns $conn $param [string trim $value "{}"]
}

proc save_system {args} {
    # every sink driven
    dict for {name i} $::inst {
        dict for {port d} [interfaces $name] {
            if {![lindex $d 2]} continue
            set found 0
            dict for {c p} $::conns { if {[lindex [split $c /] 1] eq "$name.$port"} { set found 1 } }
            if {!$found} { model_error "save_system: $name.$port is not connected" }
        }
    }
    set report {}
    # address maps per master
    set maps [dict create]
    dict for {c p} $::conns {
        lassign [split $c /] m s
        if {[lindex [iface $m] 0] ne "mm"} continue
        if {![dict exists $p baseAddress]} { model_error "connection $c has no baseAddress" }
        set base [expr {[dict get $p baseAddress]}]
        set span [lindex [iface $s] 3]
        set reach [lindex [iface $m] 3]
        if {$base % $span} { model_error [format "%s at 0x%X is not aligned to its span 0x%X" $s $base $span] }
        if {$base + $span > $reach} { model_error [format "%s at 0x%X is beyond the reach of %s" $s $base $m] }
        dict for {other rec} [expr {[dict exists $maps $m] ? [dict get $maps $m] : {}}] {
            lassign $rec ob os
            if {$base < $ob + $os && $ob < $base + $span} {
                model_error [format "%s at 0x%X (+0x%X) overlaps %s at 0x%X on %s" \
                    $s $base $span $other $ob $m]
            }
        }
        dict set maps $m $s [list $base $span]
        lappend report [format "map %s %s 0x%X 0x%X" $m $s $base $span]
        if {[llength [iface $s]] > 4} { lappend report "bridge $s [lindex [iface $s] 4]" }
    }
    # interrupt lines
    set lines [dict create]
    dict for {c p} $::conns {
        lassign [split $c /] r s
        if {[lindex [iface $r] 0] ne "irq"} continue
        if {![dict exists $p irqNumber]} { model_error "connection $c has no irqNumber" }
        set n [dict get $p irqNumber]
        if {[dict exists $lines $r/$n]} {
            model_error "irq $n of $r is taken by both [dict get $lines $r/$n] and $s"
        }
        dict set lines $r/$n $s
        lappend report "irq $r $s $n"
    }
    set fh [open $::env(VTA_TCL_MODEL_REPORT) w]
    puts $fh [join $report \n]
    close $fh
}
