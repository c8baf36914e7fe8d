#[allow(unused_mut)]
fn lstm(mut m: &Lstm, mut xs: &[Tensor], mut ys: &[Tensor]) -> Tensor {
    #[allow(non_snake_case)]
    let __janus_v_janus_tail;
    #[allow(
        unused_mut,
        unused_variables,
        unused_assignments,
        unused_imports,
        unreachable_code,
        non_snake_case,
        clippy::all
    )]
    {
        use ::janus::rt::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputModuleRef as _, OutputOpaque as _,
            ProbeKeyed as _, ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
            function: "lstm",
            file: ::core::file!(),
            line: ::core::line!(),
            index: 1u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
        });
        let __janus_w_janus_tail = ::janus::rt::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || {
                    ::std::vec![
                        (& ::janus::rt::Probe(& m.wh)).probe("m.wh"), (&
                        ::janus::rt::Probe(& xs)).probe("xs"), (& ::janus::rt::Probe(& m
                        .wx)).probe("m.wx"), (& ::janus::rt::Probe(& m.b)).probe("m.b"),
                        (& ::janus::rt::Probe(& m.wy)).probe("m.wy"), (&
                        ::janus::rt::Probe(& m.by)).probe("m.by"), (&
                        ::janus::rt::Probe(& ys)).probe("ys")
                    ]
                },
                &[],
            )
        {
            ::janus::rt::Enter::Body(__janus_scope) => {
                let (__janus_o_janus_tail,) = {
                    let (bsz, hid) = (xs[0].dims()[0], m.wh.dims()[0]);
                    let mut h = Tensor::zeros([bsz, hid]);
                    let mut c = Tensor::zeros([bsz, hid]);
                    let mut loss = Tensor::scalar(0.0);
                    for mut t in 0..xs.len() {
                        #[allow(
                            unused_mut,
                            unused_variables,
                            unused_assignments,
                            unused_imports,
                            unreachable_code,
                            non_snake_case,
                            clippy::all
                        )]
                        {
                            use ::janus::rt::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputModuleRef as _, OutputOpaque as _, ProbeKeyed as _,
                                ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
                                function: "lstm",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                index: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                            });
                            match __JANUS_FRAGMENT
                                .enter(
                                    || {
                                        ::std::vec![
                                            (& ::janus::rt::Probe(& xs[t])).probe("xs[t]"), (&
                                            ::janus::rt::Probe(& m.wx)).probe("m.wx"), (&
                                            ::janus::rt::Probe(& h)).probe("h"), (& ::janus::rt::Probe(&
                                            m.wh)).probe("m.wh"), (& ::janus::rt::Probe(& m.b))
                                            .probe("m.b"), (& ::janus::rt::Probe(& c)).probe("c"), (&
                                            ::janus::rt::Probe(& loss)).probe("loss"), (&
                                            ::janus::rt::Probe(& m.wy)).probe("m.wy"), (&
                                            ::janus::rt::Probe(& m.by)).probe("m.by"), (&
                                            ::janus::rt::Probe(& ys[t])).probe("ys[t]")
                                        ]
                                    },
                                    &[],
                                )
                            {
                                ::janus::rt::Enter::Body(__janus_scope) => {
                                    let () = {
                                        let mut g = xs[t].matmul(&m.wx) + h.matmul(&m.wh) + &m.b;
                                        let [i, f, gg, o] = g.chunk::<4>(1);
                                        c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
                                        h = o.sigmoid() * c.tanh();
                                        loss = loss
                                            + (h.matmul(&m.wy) + &m.by).cross_entropy(&ys[t]);
                                        ()
                                    };
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & ::janus::rt::Witness::of(& c)).output(& c, "c"), (&& &
                                                ::janus::rt::Witness::of(& h)).output(& h, "h"), (&& &
                                                ::janus::rt::Witness::of(& loss)).output(& loss, "loss")
                                            ],
                                        );
                                }
                                ::janus::rt::Enter::Replay(mut __janus_out) => {
                                    (&&&::janus::rt::Witness::of(&c))
                                        .restore(&mut c, &mut __janus_out);
                                    (&&&::janus::rt::Witness::of(&h))
                                        .restore(&mut h, &mut __janus_out);
                                    (&&&::janus::rt::Witness::of(&loss))
                                        .restore(&mut loss, &mut __janus_out);
                                }
                            }
                        }
                    }
                    let __janus_tail = loss / xs.len() as f64;
                    __janus_w_janus_tail.bind(&__janus_tail);
                    (__janus_tail,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & __janus_w_janus_tail).output(& __janus_o_janus_tail,
                            "return value")
                        ],
                    );
                __janus_v_janus_tail = __janus_o_janus_tail;
            }
            ::janus::rt::Enter::Replay(mut __janus_out) => {
                __janus_v_janus_tail = (&&&__janus_w_janus_tail).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut __janus_tail = __janus_v_janus_tail;
    __janus_tail
}
